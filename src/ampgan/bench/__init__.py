"""`ampgan bench`: timing the training step per batch size and precision, its statistics and output."""
