-- One bundle per question, stored in rms_bundles with a chained receipt in rms_receipts;
-- rms_store returns the receipt_id. min_score drops the notes the ranking scored as noise.
select
    question,
    rms_store(
        list({'id': note_id, 'score': relevance, 'content': body}),
        300,
        config := {'min_score': 0.1, 'query': question},
        namespace := 'dbt-example'
    ) as receipt_id
from {{ ref('team_notes') }}
group by question
