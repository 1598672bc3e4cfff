"""Run in the venv with torchvision (MEMPLAN_VIDEO_PYTHON): the tiles transformers' own Llama4ImageProcessor makes of
blank images of the (width, height) pairs read from stdin as JSON, printed as JSON."""

import json
import sys

import numpy as np
from transformers.models.llama4.image_processing_llama4 import Llama4ImageProcessor

processor = Llama4ImageProcessor()
sizes = json.load(sys.stdin)
out = [
    processor(images=np.zeros((h, w, 3), dtype=np.uint8), return_tensors="pt")["pixel_values"].shape[0]
    for w, h in sizes
]
print(json.dumps(out))
