"""GANs through one seam: the contract (contract.py), what a loss receives (context.py), the built-in
models (acgan.py, acgan_2019.py, ...) and the registry that finds a model by name or file (registry.py)."""

from ampgan.gan.context import LossContext
from ampgan.gan.contract import GAN, Adam, DataSpec, Update
from ampgan.gan.registry import ModelRecipe, model_names, resolve_model

__all__ = ["GAN", "Adam", "DataSpec", "LossContext", "ModelRecipe", "Update", "model_names", "resolve_model"]
