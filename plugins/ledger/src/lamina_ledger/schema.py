"""The ledger's schema as versioned migrations, written once for SQLite and PostgreSQL."""

from __future__ import annotations

#: Marks a database as a Lamina ledger (``ledger_meta.application``).
APPLICATION = "lamina-ledger"

#: Migration N brings a ledger from version N-1 to N. Append only; never edit a shipped one.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """CREATE TABLE threads (
            id TEXT PRIMARY KEY,
            head_turn_id TEXT,
            forked_from_turn_id TEXT,
            created_at TEXT NOT NULL
        )""",
        """CREATE TABLE sessions (
            label TEXT PRIMARY KEY,
            thread_id TEXT NOT NULL REFERENCES threads(id),
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        )""",
        """CREATE TABLE turns (
            id TEXT PRIMARY KEY,
            thread_id TEXT NOT NULL,
            type TEXT NOT NULL CHECK (type IN ('normal', 'compaction')),
            parent_id TEXT,
            model TEXT,
            provider TEXT,
            total_tokens BIGINT,
            input_tokens BIGINT,
            cached_input_tokens BIGINT,
            cache_creation_tokens BIGINT,
            output_tokens BIGINT,
            started_at TEXT NOT NULL,
            completed_at TEXT
        )""",
        "CREATE INDEX turns_parent ON turns (parent_id)",
        """CREATE TABLE messages (
            turn_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
            content_json TEXT NOT NULL,
            context_json TEXT,
            token_count BIGINT,
            PRIMARY KEY (turn_id, seq)
        )""",
        """CREATE TABLE compactions (
            turn_id TEXT PRIMARY KEY,
            summary TEXT NOT NULL,
            first_kept_turn_id TEXT,
            tokens_before BIGINT,
            tokens_after BIGINT,
            trigger TEXT NOT NULL
                CHECK (trigger IN ('context_limit', 'overflow_recovery', 'manual')),
            summarizer TEXT,
            created_at TEXT NOT NULL
        )""",
    ),
    (
        # The tokenizer that made a turn's stored counts (total_tokens, messages.token_count):
        # assembly trusts them only for that tokenizer.
        "ALTER TABLE turns ADD COLUMN counted_by TEXT",
    ),
    (
        # Bumped with every append and compaction, in the same transaction: a reader that
        # kept a session's decoded history knows cheaply whether it is still current.
        "ALTER TABLE sessions ADD COLUMN version BIGINT NOT NULL DEFAULT 0",
        # A message's content hash, computed once when written (the block's ``hash``).
        "ALTER TABLE messages ADD COLUMN content_hash TEXT",
    ),
    (
        # What a turn cost and why it ended: its price from models.dev's (USD), the agent's
        # stop reason and error.
        "ALTER TABLE turns ADD COLUMN cost DOUBLE PRECISION",
        "ALTER TABLE turns ADD COLUMN stop_reason TEXT",
        "ALTER TABLE turns ADD COLUMN error TEXT",
        # The stable prefix the turn's request was assembled with: its hash and size, and its
        # blocks ([id, short hash] pairs) after the first ``prefix_base`` of the parent turn's
        # (0: the whole list). ``prefix_change``/``prefix_block``: how the prefix failed to
        # extend the parent's (a cache bust) and the first block that changed.
        "ALTER TABLE turns ADD COLUMN prefix_sha256 TEXT",
        "ALTER TABLE turns ADD COLUMN prefix_tokens BIGINT",
        "ALTER TABLE turns ADD COLUMN prefix_base BIGINT",
        "ALTER TABLE turns ADD COLUMN prefix_blocks TEXT",
        "ALTER TABLE turns ADD COLUMN prefix_change TEXT",
        "ALTER TABLE turns ADD COLUMN prefix_block TEXT",
    ),
)

SCHEMA_VERSION = len(MIGRATIONS)

CREATE_META = "CREATE TABLE ledger_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
