"""Quickstart: rank a few memories in SQL and pack them into 300 tokens."""

import rms_duck

con = rms_duck.connect()  # in-memory DuckDB, UTC, schema + UDFs + macros
con.execute("""
    INSERT INTO rms_nodes (id, type, content, confidence, event_time) VALUES
    ('00000000-0000-4000-8000-000000000001', 'fact', 'The cut-over is on 2026-12-19.', 0.9, NULL),
    ('00000000-0000-4000-8000-000000000002', 'task', 'Write the rollback runbook.', 0.9,
     '2026-11-05'),
    ('00000000-0000-4000-8000-000000000003', 'note', 'Jonas owns the egress rules.', 0.8, NULL),
    ('00000000-0000-4000-8000-000000000004', 'note',
     repeat('A very long meeting transcript. ', 60), 0.5, NULL)
""")
row = con.sql("""
    SELECT b.tokens_used, len(b.included) AS packed, b.excluded, b.context
    FROM (SELECT pack_context(list(c), 300) AS b
          FROM (SELECT id, content, type, confidence, event_time,
                       CASE WHEN content ILIKE '%cut-over%' THEN 0.9 ELSE 0.4 END AS score
                FROM rms_nodes) AS c)
""").fetchall()[0]
tokens_used, packed, excluded, context = row
print(context)
print(f"tokens_used={tokens_used} packed={packed} excluded={excluded}")
