import { AUDIT_LINK_DOMAIN, GENESIS_HASH } from "@tessera/core/store-kit";
import { recordActsFunctionV7 } from "./act-function-v7.js";
import { recordActsFunctionV8 } from "./act-function-v8.js";

/**
 * Schema version 9: `record_acts` records a batch of one act with single-row statements.
 *
 * When calls do not overlap (a host at low load, every call at c=1) each batch holds one act,
 * and the batch machinery costs most of its time: the claim's `DISTINCT ON` over the batch,
 * the counters locked through a CTE and written back in a loop, the events gathered into
 * arrays and inserted from them (measured with `auto_explain`: 186 µs of statements and about
 * 120 µs of PL/pgSQL around them per act). One act needs none of it: its claim is one
 * `INSERT … ON CONFLICT DO NOTHING`, its spend one guarded upsert, its event one head lock,
 * one head update and one insert.
 *
 * Same phases in the same lock order (claim, counter, head), so a single act and a batch
 * cannot deadlock each other; same answers, row for row. An act whose versions moved (version
 * 8's check) goes the batch's way, which answers `stale`.
 *
 * Both overloads are replaced, same signatures, so a process of the previous release calls
 * them unchanged. Released text: a change is a new migration step, never an edit of this one.
 */
export function recordActsFunctionsV9(t: (name: string) => string): string[] {
  const declared = "      link text;\n";
  const alone = "      IF acts = 0 THEN RETURN; END IF;\n";
  const checked = `        FOREACH i IN ARRAY stale LOOP
          p_claim_keys[i] := NULL;
          p_usage_keys[i] := NULL;
        END LOOP;
      END IF;
`;
  const v7 = replaceOnce(
    replaceOnce(recordActsFunctionV7(t), declared, declared + DECLARED),
    alone,
    alone + singleAct(t, "acts = 1"),
  );
  const v8 = replaceOnce(
    replaceOnce(recordActsFunctionV8(t), declared, declared + DECLARED),
    checked,
    checked + singleAct(t, "acts = 1 AND cardinality(stale) = 0"),
  );
  return [v7, v8].map((text) => {
    if (!text.startsWith("CREATE OR REPLACE FUNCTION")) {
      throw new Error("record_acts v9: the version-7 text changed; write the new step out in full");
    }
    return text;
  });
}

const DECLARED = "      used_now bigint;\n";

/** The single act's path: the four phases of the batch, one row each. */
function singleAct(t: (name: string) => string, when: string): string {
  return `      -- One act alone: the batch's four phases as single-row statements, same lock order.
      IF ${when} THEN
        ev := 1;
        -- 1. The claim: inserted, or the holder read back (inserted again if it vanished).
        IF p_claim_keys[1] IS NOT NULL THEN
          FOR attempt IN 1..3 LOOP
            INSERT INTO ${t("claims")} (key, session_key, record, claimed_at)
              VALUES (p_claim_keys[1], p_session_keys[1], p_records[1], p_claimed_ats[1])
              ON CONFLICT DO NOTHING;
            EXIT WHEN FOUND;
            RETURN QUERY SELECT 1, 'claimed'::text, NULL::bigint, h.record, h.receipt_status,
                h.settled_at, h.answer
              FROM ${t("claims")} AS h WHERE h.key = p_claim_keys[1];
            IF FOUND THEN RETURN; END IF;
            IF attempt = 3 THEN
              RAISE EXCEPTION 'a claim neither inserted nor read back';
            END IF;
          END LOOP;
        END IF;
        -- 2. The spend: the counter made at its first use or raised under the guard; a guard
        -- that fails still locks the row, and the act records the exhausted event instead.
        IF p_usage_keys[1] IS NOT NULL THEN
          INSERT INTO ${t("usage")} AS u (key, ids, used) VALUES (p_usage_keys[1], p_usage_ids[1], 1)
            ON CONFLICT (key) DO UPDATE SET used = u.used + 1 WHERE u.used < p_max_uses[1]
            RETURNING u.used INTO used_now;
          IF NOT FOUND THEN
            ev := 2;
            SELECT u.used INTO STRICT used_now FROM ${t("usage")} AS u WHERE u.key = p_usage_keys[1];
          END IF;
        END IF;
        -- 3. The event, linked under its stream's head lock.
        s := p_stream_keys[ev];
        SELECT h.seq, h.hash INTO head_seq, head_hash FROM ${t("audit_heads")} AS h
          WHERE h.stream_key = s FOR UPDATE;
        IF NOT FOUND THEN
          INSERT INTO ${t("audit_heads")} (stream_key, seq, hash) VALUES (s, 0, '${GENESIS_HASH}')
            ON CONFLICT DO NOTHING;
          SELECT h.seq, h.hash INTO STRICT head_seq, head_hash FROM ${t("audit_heads")} AS h
            WHERE h.stream_key = s FOR UPDATE;
        END IF;
        head_seq := head_seq + 1;
        link := encode(sha256(convert_to('${AUDIT_LINK_DOMAIN}' || E'\\n' || head_seq || E'\\n'
          || head_hash || E'\\n' || p_digests[ev], 'UTF8')), 'hex');
        UPDATE ${t("audit_heads")} SET seq = head_seq, hash = link WHERE stream_key = s;
        INSERT INTO ${t("audit")} (call_key, trace_key, event)
          VALUES (p_call_keys[ev], p_trace_keys[ev], '{"seq":' || head_seq || ',"prev":"'
            || head_hash || '","hash":"' || link || '",' || substr(p_bodies[ev], 2));
        -- 4. A denial settles its claim.
        IF p_claim_keys[1] IS NOT NULL AND p_answers[ev] IS NOT NULL THEN
          UPDATE ${t("claims")} SET receipt_status = 'denied', settled_at = p_settled_ats[ev],
              answer = p_answers[ev]
            WHERE key = p_claim_keys[1] AND receipt_status IS NULL;
        END IF;
        RETURN QUERY SELECT 1, CASE WHEN ev = 1 THEN 'event' ELSE 'exhausted' END::text,
          used_now, NULL::text, NULL::text, NULL::bigint, NULL::text;
        RETURN;
      END IF;
`;
}

function replaceOnce(text: string, before: string, after: string): string {
  if (text.split(before).length !== 2) {
    throw new Error("record_acts v9: the earlier text changed; write the new step out in full");
  }
  return text.replace(before, after);
}
