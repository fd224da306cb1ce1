"""Workload spec: a cascade of Einsums (verbose or concise form), as written in YAML."""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, field_validator, model_validator

from .affine import parse_affine
from .base import Expr, PathValueError, SpecModel, sequence_of
from .concise import parse_concise, parse_concise_full
from .errors import SpecError

__all__ = ["Einsum", "Operand", "TensorAccess", "Workload", "parse_concise"]

_RANK = re.compile(r"^[A-Z][A-Za-z0-9_]*$")
_VAR = re.compile(r"^[a-z][A-Za-z0-9_]*$")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SYMBOL = re.compile(r"^[A-Z][A-Za-z0-9_]*$")
MAP_OPERATORS = ("multiply", "add", "subtract", "max", "divide", "exp_difference", "copy")
"""Built-in map operators of extended Einsums (others are custom names)."""
REDUCE_OPERATORS = ("add", "max", "none")


class Operand(SpecModel):
    """A tensor read at one index: an operand of an Einsum's map operator.

    Index expressions are affine in the rank variables (lowercase); uppercase names are
    rank sizes or variables used as constants (``{M: m1*M0 + m0}``, ``{M1: M1}``).
    """

    name: str
    """Tensor name."""
    projection: list[str | int] | dict[str, str | int] = Field(default_factory=list)
    """Index expression per rank: a list (rank = upper-cased variable) or {Rank: expr}."""

    @field_validator("projection", mode="before")
    @classmethod
    def _projection_items(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {str(k): (str(v) if not isinstance(v, int) else v) for k, v in value.items()}
        return value

    def ranks(self) -> dict[str, str]:
        """{Rank: index expression} with list projections expanded."""
        if isinstance(self.projection, dict):
            return {k: str(v) for k, v in self.projection.items()}
        out: dict[str, str] = {}
        for item in self.projection:
            text = str(item).strip()
            if not _VAR.match(text):
                raise ValueError(
                    f"tensor {self.name}: list projection entries must be rank variables, "
                    f"got '{text}' (write 'Rank: {text}')"
                )
            out[text.upper()] = text
        return out


class TensorAccess(Operand):
    """How one Einsum reads or writes one tensor."""

    output: bool = False
    """True if the Einsum writes this tensor."""
    bits_per_value: Expr | None = None
    """Bits per value of this tensor (overrides the workload's bits_per_value)."""
    persistent: bool = False
    """The tensor must live in its backing storage for the whole workload."""
    backing_storage_size_scale: Expr = 1
    """Declared for compatibility; has no effect (as in the reference tool)."""


class RenameEntry(SpecModel):
    """One rename: a new name for the tensor set (or rank variables) given by ``source``."""

    name: str
    """The new name, usable in expressions of this Einsum (e.g. ``input``)."""
    source: Expr
    """Set expression choosing what the name stands for."""
    expected_count: Expr | None = None
    """If given, how many elements the set must have (an expression)."""


def _rename_list(value: Any) -> Any:
    if isinstance(value, dict):
        return [{"name": k, "source": v} for k, v in value.items()]
    return value


class Einsum(SpecModel):
    """One Einsum of the workload."""

    name: str = ""
    """Unique name; defaults to the output tensor's name in concise form."""
    einsum: str | None = None
    """Concise form, e.g. ``Z[m, n] = A[m, k] * B[k, n]``."""
    tensor_accesses: list[TensorAccess] = Field(default_factory=list)
    """The tensors read and written (verbose form)."""
    iteration_space_shape: list[str] = Field(default_factory=list)
    """Extra constraints on rank variables, e.g. ``0 <= r < 3`` (ANDed)."""
    rank_sizes: dict[str, Expr] = Field(default_factory=dict)
    """Rank sizes for this Einsum only (added to the workload's)."""
    renames: list[RenameEntry] = Field(default_factory=list)
    """Names for tensor sets of this Einsum: {new: set_expr} or a list of entries."""
    is_copy_operation: bool = False
    """A copy: one input moved to the output's location, no computes."""
    n_instances: Expr = 1
    """How many times this Einsum runs (scales its metrics)."""
    map_operator: str = "multiply"
    """Extended Einsums: operator combining the inputs at each point (see MAP_OPERATORS)."""
    reduce_operator: str = "add"
    """Extended Einsums: how points mapping to one output are combined (add, max, none)."""
    # The concise form fills ``operands``: a tensor may appear twice (RM[m1], RM[m1+1])
    # or be the output itself (a recurrence), which one tensor access cannot say.
    operands: list[Operand] = Field(default_factory=list)
    """Extended Einsums: the map operator's operands in order (default: the inputs)."""
    # {m1: -inf}: the output is written at m1 + 1 and holds -inf at coordinate 0.
    iterative: dict[str, Expr] = Field(default_factory=dict)
    """Iterative rank variables -> the output's initial value, e.g. ``{m1: -inf}``."""

    _field_renames = field_validator("renames", mode="before")(lambda cls, v: _rename_list(v))

    @field_validator("iteration_space_shape", mode="before")
    @classmethod
    def _shape_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [value]
        if isinstance(value, dict):
            return list(value.values())
        return value

    @field_validator("iterative", mode="before")
    @classmethod
    def _iterative_initial(cls, value: Any) -> Any:
        """``{m1: {initial: x}}`` is the long form of ``{m1: x}``."""
        if not isinstance(value, dict):
            return value
        out = {}
        for var, spec in value.items():
            if isinstance(spec, dict):
                if set(spec) - {"initial"}:
                    extra = ", ".join(map(str, set(spec) - {"initial"}))
                    raise PathValueError(f"only 'initial' may be given, got {extra}", (str(var),))
                spec = spec.get("initial", 0)
            out[str(var)] = spec
        return out

    @model_validator(mode="before")
    @classmethod
    def _concise(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = {"einsum": value}
        if isinstance(value, dict) and value.get("einsum") is not None:
            value = dict(value)
            parsed = parse_concise_full(str(value["einsum"]))
            if value.get("tensor_accesses"):
                raise ValueError("give either 'einsum' or 'tensor_accesses', not both")
            value["tensor_accesses"] = parsed["tensor_accesses"]
            value.setdefault("name", parsed["name"])
            # Explicit YAML fields win over what the text says.
            value.setdefault("map_operator", parsed["map_operator"])
            if parsed["reduce_operator"] is not None:
                value.setdefault("reduce_operator", parsed["reduce_operator"])
            value.setdefault("operands", parsed["operands"])
        return value

    @model_validator(mode="after")
    def _check(self) -> Einsum:
        if not self.name:
            raise ValueError("an Einsum needs a name")
        if self.name == "Total":
            raise ValueError("'Total' is reserved and cannot name an Einsum")
        outputs = [t.name for t in self.tensor_accesses if t.output]
        if not outputs:
            raise ValueError(f"Einsum {self.name} has no output tensor")
        seen = set()
        for j, t in enumerate(self.tensor_accesses):
            if t.name in seen:
                raise PathValueError(
                    f"Einsum {self.name} names tensor {t.name} twice", ("tensor_accesses", j)
                )
            seen.add(t.name)
            where = ("tensor_accesses", j, "projection")
            try:
                ranks = t.ranks()
            except ValueError as err:
                raise PathValueError(str(err), where) from None
            for rank, expr in ranks.items():
                if not _RANK.match(rank):
                    raise PathValueError(
                        f"rank names start with an uppercase letter, got '{rank}'", where
                    )
                for var in _IDENT.findall(str(expr)):
                    if not (_VAR.match(var) or _SYMBOL.match(var)):
                        raise PathValueError(
                            f"rank variables start with a lowercase letter, got '{var}' "
                            f"in {t.name}[{rank}: {expr}]",
                            where,
                        )
        if self.reduce_operator not in REDUCE_OPERATORS:
            raise PathValueError(
                f"reduce_operator must be one of {', '.join(REDUCE_OPERATORS)}, "
                f"got '{self.reduce_operator}'",
                ("reduce_operator",),
            )
        if not _IDENT.fullmatch(self.map_operator):
            raise PathValueError(
                f"map_operator must be a name, got '{self.map_operator}'", ("map_operator",)
            )
        if self.is_copy_operation:
            inputs = [t for t in self.tensor_accesses if not t.output]
            if len(inputs) != 1:
                raise ValueError(f"copy Einsum {self.name} needs exactly one input")
        for j, op in enumerate(self.operands):
            if op.name not in self.tensors:
                raise PathValueError(
                    f"operand {op.name} is not a tensor of Einsum {self.name}", ("operands", j)
                )
        self._check_iterative()
        return self

    def _check_iterative(self) -> None:
        """Each iterative variable v must index exactly one output rank, as ``v + 1``."""
        out = self.access(self.outputs[0]).ranks() if self.outputs else {}
        for var in self.iterative:
            if not _VAR.match(var) or var not in self.rank_variables:
                raise PathValueError(
                    f"iterative: '{var}' is not a rank variable of Einsum {self.name}",
                    ("iterative", var),
                )
            hits = [(r, x) for r, x in out.items() if var in _IDENT.findall(str(x))]
            ok = len(hits) == 1
            if ok:
                try:
                    step = parse_affine(hits[0][1])
                except SpecError:
                    ok = False
                else:
                    ok = step.coeffs == ((var, 1),) and step.const == 1
            if not ok:
                raise PathValueError(
                    f"iterative rank variable '{var}': the output must be written at "
                    f"'{var} + 1' on one rank, e.g. {self.outputs[0]}[{var}+1, ...]",
                    ("iterative", var),
                )

    def iterated_ranks(self) -> dict[str, str]:
        """Iterative rank variable -> the output rank it steps (``RM[M1: m1+1]`` -> M1)."""
        out = self.access(self.outputs[0]).ranks()
        return {
            v: next(r for r, x in out.items() if v in _IDENT.findall(str(x)))
            for v in self.iterative
        }

    def operand_list(self) -> list[Operand]:
        """The map operator's operands: ``operands`` if given, else the inputs in order."""
        if self.operands:
            return list(self.operands)
        return [t for t in self.tensor_accesses if not t.output]

    @property
    def inputs(self) -> list[str]:
        """Names of the tensors read."""
        return [t.name for t in self.tensor_accesses if not t.output]

    @property
    def outputs(self) -> list[str]:
        """Names of the tensors written."""
        return [t.name for t in self.tensor_accesses if t.output]

    @property
    def tensors(self) -> list[str]:
        """All tensor names, in declaration order."""
        return [t.name for t in self.tensor_accesses]

    def access(self, tensor: str) -> TensorAccess:
        """The access of ``tensor`` (KeyError if absent)."""
        for t in self.tensor_accesses:
            if t.name == tensor:
                return t
        raise KeyError(tensor)

    @property
    def rank_variables(self) -> list[str]:
        """Rank variables in order of first appearance in the projections."""
        out: list[str] = []
        for t in self.tensor_accesses:
            for expr in t.ranks().values():
                for var in _IDENT.findall(str(expr)):
                    if _VAR.match(var) and var not in out:
                        out.append(var)
        return out


class RenameEinsum(SpecModel):
    """Renames applied to Einsums (only the ``default`` entry is used)."""

    name: str
    """Einsum name, or ``default`` for every Einsum."""
    tensor_accesses: list[RenameEntry] = Field(default_factory=list)
    """Names for tensor sets."""
    rank_variables: list[RenameEntry] = Field(default_factory=list)
    """Names for rank-variable sets."""

    _lists = field_validator("tensor_accesses", "rank_variables", mode="before")(
        lambda cls, v: _rename_list(v)
    )


class Renames(SpecModel):
    """Top-level renames."""

    einsums: list[RenameEinsum] = Field(default_factory=list)
    """Per-Einsum rename entries; ``default`` applies to all."""

    def default(self) -> RenameEinsum | None:
        """The ``default`` entry, if any."""
        return next((e for e in self.einsums if e.name == "default"), None)


class Workload(SpecModel):
    """A cascade of Einsums with shared rank sizes and bit widths."""

    rank_sizes: dict[str, Expr] = Field(default_factory=dict)
    """Rank -> size; implies 0 <= projection < size."""
    iteration_space_shape: dict[str, str] = Field(default_factory=dict)
    """Rank variable -> constraint, e.g. ``0 <= m < 128``."""
    bits_per_value: dict[str, Expr] = Field(default_factory=dict)
    """Set expression -> bits per value."""
    persistent_tensors: Expr | None = None
    """Set expression of tensors that stay in their backing storage throughout."""
    n_instances: Expr = 1
    """Repeats the whole workload (scales all metrics)."""
    einsums: list[Einsum] = Field(default_factory=list)
    """The Einsums, in program order (nested lists are flattened)."""
    version: Any = None
    """Format version written by older spec files (e.g. ``"0.5"``); ignored."""

    @model_validator(mode="before")
    @classmethod
    def _old_names(cls, value: Any) -> Any:
        """``shape:`` is the older name of ``iteration_space_shape``."""
        if isinstance(value, dict) and "shape" in value:
            if "iteration_space_shape" in value:
                raise ValueError("give either 'shape' or 'iteration_space_shape', not both")
            value = {("iteration_space_shape" if k == "shape" else k): v for k, v in value.items()}
        return value

    @field_validator("einsums", mode="before")
    @classmethod
    def _flatten(cls, value: Any) -> Any:
        return sequence_of(value) if isinstance(value, list) else value

    @field_validator("iteration_space_shape", mode="before")
    @classmethod
    def _shape_text(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: str(v) for k, v in value.items()}
        return value

    @model_validator(mode="after")
    def _unique(self) -> Workload:
        seen: set[str] = set()
        for i, e in enumerate(self.einsums):
            if e.name in seen:
                # The index counts flattened Einsums; nested lists make it approximate.
                raise PathValueError(
                    f"Einsum names must be unique: {e.name} repeated", ("einsums", i)
                )
            seen.add(e.name)
        return self

    def iterated_tensors(self) -> dict[str, set[str]]:
        """Tensors written by a recurrence -> their iterative ranks (extent size + 1)."""
        out: dict[str, set[str]] = {}
        for e in self.einsums:
            for rank in e.iterated_ranks().values():
                out.setdefault(e.outputs[0], set()).add(rank)
        return out

    def iterative_ranks(self) -> set[str]:
        """Ranks stepped by some recurrence (``M1`` in ``RM[m1+1, p]``)."""
        return {r for ranks in self.iterated_tensors().values() for r in ranks}

    def einsum(self, name: str) -> Einsum:
        """The Einsum called ``name``."""
        for e in self.einsums:
            if e.name == name:
                return e
        raise KeyError(name)
