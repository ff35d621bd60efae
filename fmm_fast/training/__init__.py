"""Training: the PyTorch classifier, the named base models and masked fine-tuning."""
