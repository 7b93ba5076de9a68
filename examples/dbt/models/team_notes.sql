-- The memory: one row per note (in a real project, a source or an upstream model).
select * from (values
    (1, 'Heron cut-over', 'The Heron cut-over moved to the weekend of 2026-12-19.', 0.92),
    (2, 'Heron cut-over', 'Rollback plan: keep the old cluster read-only for 48 hours.', 0.81),
    (3, 'Heron cut-over', 'Maya owns the cut-over checklist.', 0.77),
    (4, 'Heron cut-over', 'The canteen serves lasagne on Fridays.', 0.05),
    (5, 'Billing export', 'Billing exports run nightly at 02:00 UTC.', 0.88),
    (6, 'Billing export', 'The export bucket rotates its keys every 90 days.', 0.64)
) as t(note_id, question, body, relevance)
