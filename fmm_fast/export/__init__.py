"""Export: a checkpoint to a self-describing ONNX file, and that file's format."""
