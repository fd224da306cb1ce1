"""``Mapping.to_yaml()`` round-trips: random LoopTrees -> YAML file -> ``load_spec`` -> equal.

The YAML goes through the whole loader (Jinja first, then YAML), so any text the tree
holds (labels, names) must survive both.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fusemap.spec import mapping as M
from fusemap.spec.spec import load_spec
from tests.support.marks import examples

# Any text a YAML file can hold (no surrogates); names are shorter, labels anything.
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
NAME = st.one_of(
    st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True),
    st.sampled_from(
        [
            "true",
            "null",
            "1",
            "1e3",
            "inf",
            "~",
            "- x",
            "a: b",
            "{{ x }}",
            "#c",
            "<<",
            "?",
            "=",
            "!x",
            "&a",
            "*a",
        ]
    ),
    TEXT,
)
OPTIONAL_TEXT = st.none() | TEXT
SIZE = st.integers(min_value=1, max_value=2**40)
BINDING = st.none() | st.dictionaries(NAME, st.integers() | NAME, max_size=3)


def storage():
    return st.builds(
        M.Storage,
        tensors=st.lists(NAME, max_size=4),
        component=NAME,
        persistent=st.booleans(),
        binding=BINDING,
        text=OPTIONAL_TEXT,
    )


def toll():
    return st.builds(
        M.Toll, tensors=st.lists(NAME, max_size=4), component=NAME, persistent=st.booleans(),
        text=OPTIONAL_TEXT,
    )  # fmt: skip


def temporal():
    return st.builds(
        M.Temporal, rank_variable=NAME, tile_shape=SIZE, initial_tile_shape=st.none() | SIZE,
        text=OPTIONAL_TEXT,
    )  # fmt: skip


def spatial():
    return st.builds(
        M.Spatial, rank_variable=NAME, tile_shape=SIZE, initial_tile_shape=st.none() | SIZE,
        name=NAME, component=NAME, text=OPTIONAL_TEXT,
    )  # fmt: skip


LEAVES = st.one_of(
    storage(),
    toll(),
    temporal(),
    spatial(),
    st.builds(M.Compute, einsum=NAME, component=NAME, text=OPTIONAL_TEXT),
    st.builds(
        M.Reservation,
        purposes=st.lists(NAME, max_size=3),
        resource=NAME,
        persistent=st.booleans(),
        text=OPTIONAL_TEXT,
    ),
    st.builds(M.TextBox, text=OPTIONAL_TEXT),
)


def chain(nodes: list) -> list:
    """A valid !Nested chain: a split may only be last, so wrap earlier ones in !Nested."""
    out = []
    for i, node in enumerate(nodes):
        if isinstance(node, M.Split) and i < len(nodes) - 1:
            node = M.Nested(nodes=[node])
        out.append(node)
    return out


def branching(children):
    nodes = st.lists(children, max_size=4)
    return st.one_of(
        st.builds(M.Nested, nodes=nodes.map(chain), text=OPTIONAL_TEXT),
        st.builds(M.Sequential, nodes=nodes, text=OPTIONAL_TEXT),
        st.builds(M.Pipeline, nodes=nodes, text=OPTIONAL_TEXT),
        st.builds(M.Split, nodes=nodes, text=OPTIONAL_TEXT),
    )


TREES = st.builds(
    M.Mapping,
    nodes=st.lists(st.recursive(LEAVES, branching, max_leaves=25), max_size=6).map(chain),
    title=OPTIONAL_TEXT,
    text=OPTIONAL_TEXT,
)


def kinds(mapping: M.Mapping) -> set[str]:
    return {node.type for node in mapping.walk() if not isinstance(node, M.Mapping)}  # type: ignore[attr-defined]


@pytest.mark.parametrize("examples", examples(150, few=8))
def test_to_yaml_loads_back_equal(examples) -> None:
    @settings(deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=examples)
    @given(TREES)
    def check(mapping: M.Mapping) -> None:
        text = mapping.to_yaml()
        for kind in kinds(mapping):
            assert f"!{kind}" in text
        with tempfile.TemporaryDirectory() as directory:
            path = Path(directory) / "mapping.yaml"
            path.write_text(text, encoding="utf-8")
            loaded = load_spec(path).mapping
        assert loaded == mapping, text
        assert loaded.to_yaml() == text

    check()


def test_yaml_special_keys_load_back_as_text() -> None:
    """``<<`` written plain is a merge key, ``? x`` a complex key: keys are quoted."""
    binding = {"<<": 1, "?": "x", "true": 2, "1": 3, "!t": 4, "&a": 5, "*a": 6, "a: b": 7}
    mapping = M.Mapping(nodes=[M.Storage(tensors=["A"], component="DRAM", binding=binding)])
    text = mapping.to_yaml()
    assert '"<<": 1' in text
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "mapping.yaml"
        path.write_text(text, encoding="utf-8")
        loaded = load_spec(path).mapping
    assert loaded == mapping, text


def test_a_deep_tree_of_every_kind() -> None:
    """A fixed example (also checks the text is what a person would write)."""
    leaf = M.Compute(einsum="Z", component="MAC", text="{{ not jinja }}")
    mapping = M.Mapping(
        title="all kinds",
        nodes=[
            M.Storage(tensors=["A", "true"], component="DRAM", persistent=True, binding={"x": 1}),
            M.Toll(tensors=["A"], component="ADC"),
            M.Temporal(rank_variable="m", tile_shape=4, initial_tile_shape=2),
            M.Spatial(rank_variable="n", tile_shape=1, name="X", component="PE"),
            M.Reservation(purposes=["A"], resource="Buffer", persistent=True),
            M.TextBox(text="label: {% raw %}"),
            M.Pipeline(
                nodes=[
                    M.Nested(nodes=[M.Sequential(nodes=[leaf])]),
                    M.Split(nodes=[M.Nested(nodes=[leaf])]),
                ]
            ),
        ],
    )
    text = mapping.to_yaml()
    assert text.startswith("mapping:\n  title: all kinds\n  nodes:\n  - !Storage\n")
    assert "tile_shape: 4\n" in text and "persistent: true\n" in text
    for kind in ("Storage", "Toll", "Temporal", "Spatial", "Reservation", "TextBox", "Pipeline",
                 "Nested", "Sequential", "Split", "Compute"):  # fmt: skip
        assert f"!{kind}\n" in text
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "mapping.yaml"
        path.write_text(text, encoding="utf-8")
        assert load_spec(path).mapping == mapping


@pytest.mark.parametrize(
    "name",
    ["?0", "? a", "*a", "&b", "!c", "%d", "@e", "`f", "-", "#", ",", "[x]", "a: b", "true", "3"],
)
def test_names_with_yaml_indicators_load_back(name: str) -> None:
    """Found by the property test above: ``tensors: [?0]`` read back as a mapping."""
    mapping = M.Mapping(nodes=[M.Storage(tensors=[name, "B"], component=name)])
    text = mapping.to_yaml()
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "mapping.yaml"
        path.write_text(text, encoding="utf-8")
        loaded = load_spec(path).mapping
    assert loaded == mapping, text
