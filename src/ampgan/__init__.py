"""ampgan: does mixed precision make my GAN train faster and cheaper, without making it worse?"""

__version__ = "0.1.0"
