swift sft --config sft.yaml
