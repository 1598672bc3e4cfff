"""Evidence: probe records and their store (store), and the calibration of analytic plans by those records
(calibrate)."""
