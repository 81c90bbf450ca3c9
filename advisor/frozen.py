"""The one base of the advisor's plain value types: immutable, and refusing fields they do not declare."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
