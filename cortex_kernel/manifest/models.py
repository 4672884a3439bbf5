"""The agent's model and the models its ``llm`` actions may name (``model:``, ``llm_models:``)."""

from __future__ import annotations

from pydantic import Field

from ..model_options import ModelOptions

__all__ = ["ListedModel", "ModelSpec"]


class ModelSpec(ModelOptions):
    """The model and its options: the same options as ``%model`` and ``--model``.

    Every field of :class:`~cortex_kernel.model_options.ModelOptions` is allowed
    here under the same name; options given on the command line or in
    ``%%agent`` win over these.
    """

    name: str | None = Field(
        default=None, description="litellm model string or replay:PATH; none: the default"
    )

    def options(self) -> ModelOptions:
        """The options alone (without the model's name)."""
        return ModelOptions(**self.model_dump(exclude={"name"}))


class ListedModel(ModelSpec):
    """A model an ``llm`` action may name, with its own options.

    It gets only the options written here (none for a bare string entry),
    not the agent model's: those may be another provider's endpoint.
    """

    name: str = Field(description="litellm model string an llm action may name")
