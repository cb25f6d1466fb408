"""Files Read renders for the model: images, PDFs, notebooks."""
