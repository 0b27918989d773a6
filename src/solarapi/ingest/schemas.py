"""Request and response bodies of the ingest token endpoints (also the OpenAPI document)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator

from solarapi.ingest.service import CreatedToken, TokenView
from solarapi.kit.timefmt import format_optional, format_timestamp
from solarapi.systems.schemas import Name, check_name


class TokenCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Annotated[Name, Field(examples=["roof logger"])]

    _name = field_validator("name")(check_name)


class TokenOut(BaseModel):
    id: str
    name: str
    display: str = Field(description="`ik_Ab12…wxyz`: the first 7 and last 4 characters")
    created_at: str
    last_used_at: str | None

    @classmethod
    def of(cls, view: TokenView) -> TokenOut:
        return cls(
            id=view.id,
            name=view.name,
            display=view.display,
            created_at=format_timestamp(view.created_at),
            last_used_at=format_optional(view.last_used_at),
        )


class TokenCreatedOut(TokenOut):
    token: str = Field(description="The full token, shown only in this answer")

    @classmethod
    def created(cls, new: CreatedToken) -> TokenCreatedOut:
        return cls(**TokenOut.of(new.view).model_dump(), token=new.token)


class TokenList(BaseModel):
    data: list[TokenOut]
