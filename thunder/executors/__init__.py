"""Executors: one module per executor. Importing this package registers the built-in ones."""

__all__ = ["get_nvfuser_executor", "get_torch_executor", "nvfuser_available"]


def get_torch_executor():
    """The torch executor (lightning-thunder's accessor; also ``thunder.pytorch_executor``)."""
    from thunder.executors import torchex

    return torchex.ex


def get_nvfuser_executor() -> None:
    """None, as lightning-thunder's wherever nvFuser cannot run (see ``thunder.executors.nvfuserex``)."""
    return None


def nvfuser_available() -> bool:
    """False: this build never runs nvFuser (``thunder.executors.nvfuserex`` says why)."""
    return False
