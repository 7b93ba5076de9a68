-- Demo ranking: word overlap between the question and each node, blended with salience.
-- Parameters: 1 = question text, 2 = namespace. Returns the columns pack_context() reads.
WITH question AS (
    SELECT list_distinct(list_filter(regexp_split_to_array(lower(?), '[^a-z0-9]+'),
                                     lambda w: length(w) > 2)) AS words
),
scored AS (
    SELECT n.*,
           len(list_intersect(list_distinct(regexp_split_to_array(lower(n.content), '[^a-z0-9]+')),
                              question.words)) / greatest(len(question.words), 1)::DOUBLE AS overlap
    FROM rms_nodes AS n, question
    WHERE n.namespace_id = ? AND n.lifecycle_state <> 'archived'
)
SELECT CAST(s.id AS VARCHAR) AS id,
       least(1.0, 0.75 * s.overlap + 0.25 * s.salience) AS score,
       s.content, s.type, s.prose, s.structured_value, s.confidence, s.salience, s.pinned,
       s.epistemic_type, s.source_type, s.lifecycle_state, s.namespace_id, s.event_time,
       s.valid_from, s.valid_to, CAST(s.superseded_by AS VARCHAR) AS superseded_by, s.speaker,
       s.session_id, s.session_position, s.condition_state,
       CASE WHEN s.overlap > 0 AND s.salience >= 0.6 THEN ['LEXICAL', 'SALIENCE']
            WHEN s.overlap > 0 THEN ['LEXICAL'] ELSE ['SALIENCE'] END AS paths,
       (SELECT list(CAST(CASE WHEN e.source_id = s.id THEN e.target_id ELSE e.source_id END AS VARCHAR))
          FROM rms_edges AS e
         WHERE e.kind = 'CONTRADICTS' AND (e.source_id = s.id OR e.target_id = s.id)) AS contradicts
FROM scored AS s
ORDER BY score DESC, s.created_at DESC, s.id
