import { recordActsFunctionV6 } from "./act-function.js";

/**
 * Schema version 7: `record_acts` planned once per connection. Under PL/pgSQL's default plan
 * choice every statement of versions 4–6 was planned again on every call (a custom plan: the
 * generic one, costed with unknown array lengths, never looked cheaper), and planning was about
 * a third of the function's CPU (measured with `perf` on the server: `GetCachedPlan` 7.4% of
 * the backend's 20% in `plpgsql_exec_function`). Forcing generic plans as they stood made it
 * worse: the statements that join the batch to a table (taken claims read back, counters
 * written, denials settled) then scanned the whole table on every call, as version 4's join did
 * before version 6 (see there). So version 7 rewrites those three as primary-key probes that
 * no plan can turn into a scan, then pins `plan_cache_mode = force_generic_plan` on the
 * function, with `enable_seqscan = off`: a generic plan is made once per connection, maybe while
 * a table is one page, and must not keep scanning it once it has grown (every row this function
 * touches is found by key; its only scans are of its own arrays, which the setting leaves be):
 *
 * - a lost claim is read back through a LATERAL lookup with a LIMIT, one probe per key;
 * - each changed counter is written by its own `UPDATE … WHERE key = $1` (one per distinct
 *   counter of the batch, usually one);
 * - each denial's claim is settled by its own `UPDATE … WHERE key = $1`, in key order.
 *
 * And it skips the statements the common batch does not need, each a run of the executor: when
 * every key it tried to claim was inserted, the read-back of the others; when every claimed act
 * has a key of its own and won it, the join that picks which acts go on (all of them do); when
 * no act is a denial with an answer, the settle loop.
 *
 * Same locks in the same order, same answers: only how the server finds the rows changed.
 * Released text: a change is a new migration step, never an edit of this one.
 */
export function recordActsFunctionV7(t: (name: string) => string): string {
  const steps: [string, string][] = [
    [
      "LANGUAGE plpgsql AS $fn$",
      `LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off
      AS $fn$`,
    ],
    [
      `present := ARRAY(SELECT c.key FROM ${t("claims")} AS c WHERE c.key = ANY(lost));`,
      `present := ARRAY(SELECT l.k FROM unnest(lost) AS l(k)
          CROSS JOIN LATERAL (SELECT 1 FROM ${t("claims")} AS c WHERE c.key = l.k LIMIT 1) AS held);`,
    ],
    [
      `UPDATE ${t("usage")} AS u SET used = c.used
        FROM unnest(counter_keys, counts) AS c(k, used) WHERE u.key = c.k AND u.used <> c.used;`,
      `FOR i IN 1..cardinality(counter_keys) LOOP
        UPDATE ${t("usage")} SET used = counts[i] WHERE key = counter_keys[i] AND used <> counts[i];
      END LOOP;`,
    ],
    [
      `UPDATE ${t("claims")} AS c SET receipt_status = 'denied', settled_at = d.at, answer = d.answer
        FROM (SELECT p_claim_keys[r.n] AS k, p_settled_ats[r.e] AS at, p_answers[r.e] AS answer
              FROM unnest(rec) WITH ORDINALITY AS r(e, n)
              WHERE r.e > 0 AND p_claim_keys[r.n] IS NOT NULL AND p_answers[r.e] IS NOT NULL) AS d
        WHERE c.key = d.k AND c.receipt_status IS NULL;`,
      `IF cardinality(array_remove(p_answers, NULL)) > 0 THEN
      FOR i IN SELECT r.n FROM unnest(rec) WITH ORDINALITY AS r(e, n)
          WHERE r.e > 0 AND p_claim_keys[r.n] IS NOT NULL AND p_answers[r.e] IS NOT NULL
          ORDER BY p_claim_keys[r.n] LOOP
        UPDATE ${t("claims")} SET receipt_status = 'denied', settled_at = p_settled_ats[rec[i]],
            answer = p_answers[rec[i]]
          WHERE key = p_claim_keys[i] AND receipt_status IS NULL;
      END LOOP;
      END IF;`,
    ],
    [
      `        won := won || inserted;
`,
      `        won := won || inserted;
        IF cardinality(inserted) = cardinality(pending) THEN
          pending := '{}';
          EXIT;
        END IF;
`,
    ],
    [
      `      rec := ARRAY(`,
      `      IF cardinality(won) = cardinality(array_remove(p_claim_keys, NULL)) THEN
        FOR i IN 1..acts LOOP
          rec[i] := i;
        END LOOP;
      ELSE
      rec := ARRAY(`,
    ],
    [
      `        ORDER BY c.n);
`,
      `        ORDER BY c.n);
      END IF;
`,
    ],
  ];
  let text = recordActsFunctionV6(t);
  for (const [before, after] of steps) {
    if (!text.includes(before)) {
      throw new Error("record_acts v7: the version-6 text changed; write the new step out in full");
    }
    text = text.replace(before, after);
  }
  return text;
}
