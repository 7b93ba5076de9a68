-- The stored contexts beside their questions: what a prompt-building step would read.
select p.question, p.receipt_id, b.tokens_used, b.included_count, b.excluded_count, b.context
from {{ ref('packed_memory') }} as p
join rms_receipts as r on r.receipt_id = cast(p.receipt_id as uuid)
join rms_bundles as b on b.bundle_id = r.bundle_id
