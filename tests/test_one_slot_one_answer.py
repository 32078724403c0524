"""One slot, one answer: the slot read and every edge read of that slot agree, at every version.

A slot is what cardinality makes exclusive: (edge type, subject) or (edge type, object). A
slot read (``slot(type, node, direction)``) answers present/absent with the nodes it holds, or
unknown with a conflict id and the fallback; every edge of the slot read on its own must say
the same: no edge is present that the slot leaves out, none unknown while the slot reads
present or absent (but through the edge's other exclusive slot, whose answer it then is), and
an unknown edge names the slot's fallback. Checked over generated streams (every policy,
cardinality and domain of the spec) decided under the current revision and under revision 2
(whose held denials disputed an edge and not its slot), on the core this process loaded;
``make test`` runs it on both.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from rocksdict import WriteBatch

from claimgraph.core.governor.revisions import CURRENT
from claimgraph.core.state import SEP, GraphState
from claimgraph.core.wire import encode_decision
from claimgraph.logs.embedded import EmbeddedLogStore
from claimgraph.projections.reader import ProjectionReader
from claimgraph.service.graph import Graph, open_graph
from claimgraph.streams.embedded import GOVERNOR_POSITION
from tests.strategies import GRAPH, Stream, streams
from tests.test_properties import examples, scratch


def _disagreements(reader: ProjectionReader, stream: Stream, v: int) -> list[str]:
    out: list[str] = []
    schema = reader.schema(v)
    types = schema.edge_types if schema is not None else {}
    sides: dict[tuple[str, tuple[str, str], str], set[tuple[str, str]]] = {}
    for et, s_type, s_id, o_type, o_id in stream.edges:
        t = types.get(et)
        if t is None:
            continue
        # the exclusive sides only: a slot is what cardinality makes exclusive (DESIGN §2)
        if t.subject_exclusive:
            sides.setdefault((et, (s_type, s_id), "out"), set()).add((o_type, o_id))
        if t.object_exclusive:
            sides.setdefault((et, (o_type, o_id), "in"), set()).add((s_type, s_id))
    for (et, node, direction), others in sorted(sides.items()):
        slot = reader.slot(et, node, v, direction, halt=False)
        for other in sorted(others):
            subject, obj = (node, other) if direction == "out" else (other, node)
            edge = reader.edge(et, subject, obj, v, halt=False)
            where = f"v{v} {et} {direction} slot of {node}, edge to {other}"
            if slot.state == "unknown":
                if edge.state == "unknown" and edge.fallback != slot.fallback:
                    out.append(f"{where}: fallback {edge.fallback} vs the slot's {slot.fallback}")
                continue
            if edge.state == "unknown":
                # an edge lies in two slots when both sides are exclusive: unknown through the
                # other one is that slot's answer, not this one's
                t = types[et]
                other_side = "in" if direction == "out" else "out"
                exclusive = t.object_exclusive if direction == "out" else t.subject_exclusive
                through = reader._slot_conflict(SEP.join((et, other_side, *other)), v)
                if not (exclusive and through == edge.conflict_id):
                    out.append(
                        f"{where}: the edge is unknown ({edge.conflict_id}), the slot {slot}"
                    )
            elif (edge.state == "present") != (other in slot.nodes):
                out.append(f"{where}: the edge is {edge.state}, the slot holds {slot.nodes}")
        if (
            slot.state == "unknown"
            and not any(
                reader.edge(
                    et, *((node, o) if direction == "out" else (o, node)), v, halt=False
                ).state
                == "unknown"
                for o in others
            )
            and reader._slot_conflict(SEP.join((et, direction, *node)), v) is None
        ):
            out.append(f"v{v} {et} {direction} slot of {node} is unknown with no unknown edge")
    return out


@contextmanager
def graph_of_revision(stream: Stream, rules: int) -> Iterator[Graph]:
    """An embedded graph whose log holds ``stream`` decided under rules revision ``rules``
    (as an older graph's log would), projected by this code."""
    from claimgraph.native.decide import decide, evolve

    state = GraphState(GRAPH)
    decisions = []
    for i, (record, now) in enumerate(zip(stream.records, stream.times, strict=True)):
        d = decide(state, record, i, now, rules=rules)
        raw = encode_decision(d)
        evolve(state, d, i, raw)
        decisions.append(raw)
    with scratch() as tmp:
        open_graph(tmp, create=True, graph=GRAPH).close()
        logs = EmbeddedLogStore(Path(tmp) / "log")
        wb = WriteBatch(raw_mode=True)
        logs.commands.stage(wb, list(stream.records), timestamps=list(stream.times))
        logs.decisions.stage(wb, decisions, timestamps=list(stream.times))
        logs.stage_position(wb, GOVERNOR_POSITION, len(decisions))
        logs.write(wb)
        logs.close()
        graph = open_graph(tmp)  # the projection is behind its log: it is folded now
        try:
            yield graph
        finally:
            graph.close()


@examples(60)
@given(streams(), st.sampled_from((CURRENT, 2)))
def test_the_slot_read_and_every_edge_read_of_it_agree_at_every_version(
    stream: Stream, rules: int
) -> None:
    """For every exclusive slot a stream touches and every edge of it, at every version, on
    logs decided under the current revision and under revision 2: the same state
    (present/absent/unknown), the same nodes, the same fallback."""
    with graph_of_revision(stream, rules) as g:
        reader = g.reader
        problems = [p for v in range(g.head() + 1) for p in _disagreements(reader, stream, v)]
        assert problems == [], problems[:5]
