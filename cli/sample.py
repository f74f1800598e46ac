"""A realistic sample workspace (boards, people, agents, stations, ~1,000 items), made deterministically.

Demo data, not the search core: used by `suli demo`, and by tests and benches that want
believable ops and product work to search.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from suli.backends.base import Backend
from suli.embedding import Embedder
from suli.errors import IndexingError
from suli.models import BoardAcl, Item, Principal, Station

WORKSPACE = "ws_acme"
NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)

PEOPLE = {
    "prn_ana": ("grp_eng",),
    "prn_ben": ("grp_eng", "grp_security"),
    "prn_chloe": ("grp_marketing",),
    "prn_dev": ("grp_eng",),
    "prn_eli": ("grp_support",),
    "prn_fay": ("grp_marketing", "grp_eng"),
}
AGENTS = {
    "prn_agent_deploybot": ("grp_eng",),
    "prn_agent_writer": ("grp_marketing",),
    "prn_agent_triage": ("grp_support",),
}
BOARDS = [
    BoardAcl(
        "brd_platform",
        WORKSPACE,
        "Platform",
        ("prn_ana", "prn_dev", "prn_agent_deploybot"),
        ("grp_eng",),
    ),
    BoardAcl(
        "brd_growth",
        WORKSPACE,
        "Growth & Launches",
        ("prn_chloe", "prn_agent_writer"),
        ("grp_marketing",),
    ),
    BoardAcl("brd_security", WORKSPACE, "Security", ("prn_ben",), ()),
    BoardAcl(
        "brd_support", WORKSPACE, "Support", ("prn_eli", "prn_agent_triage"), ("grp_support",)
    ),
]
STATIONS = [
    Station("stn_build", "Build"),
    Station("stn_review", "Review"),
    Station("stn_release", "Release"),
    Station("stn_triage", "Triage"),
]
SERVICES = [
    "payments",
    "search",
    "auth",
    "notifications",
    "billing",
    "checkout",
    "mobile app",
    "data pipeline",
    "onboarding",
    "reporting",
    "inventory",
    "API gateway",
]
REGIONS = ["eu-west", "us-east", "ap-south"]

TEMPLATES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "deploy": (
        "Deploy checklist for the {svc} service ({region})",
        "Before you deploy {svc} to {region}: freeze merges, run the database migrations in a "
        "dry run, and check the error budget. Roll out to the canary first and watch p99 latency "
        "and 5xx rates for 20 minutes. If the canary burns more than 2% of the error budget, roll "
        "back with the previous image tag {ver}. After the rollout, update the status page and "
        "close the change ticket.",
        ("deploy", "checklist", "ops"),
    ),
    "incident": (
        "Incident review: {svc} outage in {region}",
        "Summary: {svc} returned errors for {mins} minutes in {region}. Impact: customers could not "
        "complete requests. Root cause: a configuration change raised connection pool limits past "
        "what the database accepts. Detection came from the paging alert on elevated 5xx. Action "
        "items: add a config validation step, alert on pool saturation, and practise the rollback "
        "runbook. Timeline and graphs are attached.",
        ("incident", "postmortem", "reliability"),
    ),
    "launch": (
        "Launch post: {svc} {feature}",
        "Today we are launching {feature} for {svc}. It makes everyday work faster: fewer clicks, "
        "clearer status, and answers in seconds. Available to every workspace from {date}. Read "
        "the docs, try it, and tell us what you think. Thanks to the teams who tested the beta.",
        ("launch", "announcement", "marketing"),
    ),
    "spec": (
        "Spec: {feature} for {svc}",
        "Problem: users of {svc} need {feature}. Goals: ship a first version behind a flag, measure "
        "adoption, keep latency under 200 ms. Non-goals: migrating old data. Design: a new endpoint, "
        "a background job, and a settings page. Risks: load on the database, permission checks. "
        "Open questions: pricing, rollout order by region.",
        ("spec", "design", "product"),
    ),
    "runbook": (
        "Runbook: rotate credentials for {svc}",
        "When a secret for {svc} may have leaked, rotate it: create a new key in the vault, deploy "
        "it to {region} first, verify health checks, then revoke the old key. Never paste keys in "
        "chat. Page the security on-call if the old key was used after revocation.",
        ("runbook", "security", "credentials"),
    ),
    "retro": (
        "Sprint retro notes: {svc} team",
        "What went well: the {feature} demo, faster code review. What did not: flaky integration "
        "tests and a late dependency upgrade. Try next: pair on test fixes, a fixed review window "
        "each morning, and smaller pull requests.",
        ("retro", "team"),
    ),
    "support": (
        "Support macro: {svc} {problem}",
        "If a customer reports that {problem} in {svc}, ask for the workspace id and the time it "
        "happened, check the status page, and search recent incidents. Offer the workaround in the "
        "help center. Escalate to engineering with the request id when it happens again.",
        ("support", "macro", "customers"),
    ),
}
FEATURES = [
    "saved searches",
    "audit log export",
    "dark mode",
    "bulk edit",
    "webhooks",
    "SSO login",
    "usage dashboards",
    "offline mode",
    "smart reminders",
    "CSV import",
]
PROBLEMS = [
    "login fails",
    "exports are empty",
    "emails arrive late",
    "the page loads slowly",
    "charges appear twice",
    "notifications stop",
]
KIND_BOARD = {
    "deploy": "brd_platform",
    "incident": "brd_platform",
    "runbook": "brd_security",
    "launch": "brd_growth",
    "spec": None,
    "retro": None,
    "support": "brd_support",
}
OUTCOMES = [
    "approved",
    "approved",
    "completed",
    "completed",
    "in-progress",
    "rejected",
    "failed",
    "abandoned",
]


@dataclass(frozen=True)
class SampleWorkspace:
    principals: list[Principal]
    acls: list[BoardAcl]
    items: list[Item]


def build(n: int = 1000, seed: int = 7) -> SampleWorkspace:
    """The sample workspace: the same items for the same n and seed."""
    rng = random.Random(seed)
    principals = [Principal(p, WORKSPACE, "person", g) for p, g in PEOPLE.items()]
    principals += [Principal(p, WORKSPACE, "agent", g) for p, g in AGENTS.items()]
    items: list[Item] = []
    people, agents = list(PEOPLE), list(AGENTS)
    while len(items) < n:
        i = len(items)
        topic = rng.choice(list(TEMPLATES))
        title_t, body_t, tags = TEMPLATES[topic]
        fields = {
            "svc": rng.choice(SERVICES),
            "region": rng.choice(REGIONS),
            "feature": rng.choice(FEATURES),
            "problem": rng.choice(PROBLEMS),
            "ver": f"v{rng.randint(1, 9)}.{rng.randint(0, 30)}",
            "mins": rng.randint(4, 180),
            "date": (NOW - timedelta(days=rng.randint(0, 60))).date().isoformat(),
        }
        board = KIND_BOARD[topic] if rng.random() < 0.85 else None
        uploader = rng.choice(people) if board is None and rng.random() < 0.15 else None
        agent = rng.choice(agents) if rng.random() < 0.35 else None
        last = NOW - timedelta(days=rng.randint(0, 400), hours=rng.randint(0, 23))
        base = Item(
            id=f"itm_{i:05d}",
            workspace=WORKSPACE,
            kind="work-record"
            if topic in ("incident", "retro") or rng.random() < 0.2
            else "artifact",
            title=title_t.format(**fields),
            body=body_t.format(**fields),
            outcome=rng.choice(OUTCOMES),
            board=board,
            uploader=uploader,
            agent=agent,
            stations=tuple(rng.sample(STATIONS, rng.randint(0, 2))),
            references=tuple(
                dict.fromkeys(rng.choice(items).id for _ in range(rng.randint(0, 2)) if items)
            ),
            tags=tags[: rng.randint(1, len(tags))],
            provenance={
                "source": "agentpod" if agent else "app",
                "created_by": agent or uploader or rng.choice(people),
            },
            created_at=last - timedelta(days=rng.randint(1, 30)),
            updated_at=last,
            last_activity_at=last,
            url=f"https://app.example.com/items/itm_{i:05d}",
            hidden=rng.random() < 0.02,
        )
        if topic in ("spec", "deploy") and rng.random() < 0.15 and len(items) + 2 < n:
            items.extend(_chain(base, rng))  # a draft, superseded by a revision, then final
            continue
        if rng.random() < 0.03:
            items.append(_binary(base, rng))
            continue
        items.append(base)
    return SampleWorkspace(principals, BOARDS, items[:n])


def _chain(base: Item, rng: random.Random) -> list[Item]:
    """v1 -> v2 -> v3: each older version names its replacement and is marked superseded."""
    ids = [base.id + suffix for suffix in ("a", "b", "c")]
    out = []
    for n, item_id in enumerate(ids):
        final = n == len(ids) - 1
        out.append(
            replace(
                base,
                id=item_id,
                title=f"{base.title} (v{n + 1})",
                outcome=base.outcome if final else "superseded",
                superseded_by=None if final else ids[n + 1],
                last_activity_at=(base.last_activity_at or NOW) + timedelta(days=7 * n),
                url=f"https://app.example.com/items/{item_id}",
            )
        )
    return out


def _binary(base: Item, rng: random.Random) -> Item:
    kind = rng.choice(
        [
            ("image/png", "png", "Architecture diagram"),
            ("application/pdf", "pdf", "Signed-off plan"),
        ]
    )
    return replace(
        base,
        media_type=kind[0],
        path=f"uploads/{base.id}/{base.title.split(':')[0].lower().replace(' ', '-')}.{kind[1]}",
        caption=f"{kind[2]}: {rng.choice(['whiteboard photo', 'final export', 'scan of the signed copy'])}",
        body="",
    )


# Precomputed with the bundled model, so `suli demo` starts without embedding 1,000 items; a
# text or model that differs from them is embedded when loaded.
VECTORS = Path(__file__).parent / "sample_vectors.npz"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def vectors_for(items: list[Item], embedder: Embedder, path: Path = VECTORS) -> np.ndarray:
    """Stored vectors where model and text match; everything else is embedded now."""
    texts = [i.embed_text() for i in items]
    stored: dict[str, np.ndarray] = {}
    if path.exists():
        data = np.load(path)
        if str(data["model"]) == embedder.name:
            stored = dict(zip(data["sha"].tolist(), data["vectors"], strict=True))
    out = np.zeros((len(items), embedder.dimension), dtype=np.float32)
    missing = [n for n, t in enumerate(texts) if _sha(t) not in stored]
    for n, t in enumerate(texts):
        if _sha(t) in stored:
            out[n] = stored[_sha(t)]
    if missing:
        out[missing] = embedder.embed_documents([texts[n] for n in missing])
    return out


def load(backend: Backend, embedder: Embedder, ws: SampleWorkspace | None = None) -> int:
    """Put the sample's principals, ACLs and items into a backend; returns the item count."""
    ws = ws or build()
    backend.put_principals(ws.principals)
    backend.put_acls(ws.acls)
    vecs = vectors_for(ws.items, embedder)
    out = backend.upsert([(it, vecs[n]) for n, it in enumerate(ws.items)])
    if out.rejected:
        raise IndexingError(f"sample items rejected: {dict(list(out.rejected.items())[:3])}")
    backend.refresh()
    return len(out.indexed)
