import { AUDIT_LINK_DOMAIN, GENESIS_HASH } from "@tessera/core/store-kit";

/**
 * `record_acts`, the server-side function that records a batch of acts in the one statement
 * that calls it (schema version 4, `migrations.ts`). Released text: a change is a new
 * migration step (`CREATE OR REPLACE FUNCTION`), never an edit of this one.
 *
 * Acts arrive as parallel arrays in arrival order (`n` = 1..N): the claim, the spend, and
 * two events per act (the decision's at `n`, the exhausted one at N + `n`), each sent with its
 * content digest, so the function links them itself. Its four phases take their row locks in
 * one order, table by table and key by key within a table (claims, then usage, then the audit
 * heads), so two batches cannot deadlock each other:
 *
 * 1. claims: each distinct key once, its first act in arrival order inserting it. A key held
 *    already (by an earlier commit or an earlier act of the batch) is read back (a key that
 *    vanished in between, its session ended, is inserted again, three rounds at most), and
 *    its acts write nothing more: a batch of retries alone writes nothing, so its commit
 *    waits for no flush;
 * 2. spends: every counter row the batch spends locked in key order (made at 0 when new), the
 *    guard (`used < maxUses`) applied act by act in arrival order, so the last use goes to the
 *    earliest act, and each changed counter written once; a spend that loses records the
 *    exhausted event instead;
 * 3. events: per stream, the head row locked `FOR UPDATE`, every event linked after it with
 *    `sha256(domain \n seq \n prev \n digest)` (core's `auditLinkHash`, v2), the head moved
 *    once; then every event inserted with its chain fields, in one `INSERT`, in link order;
 * 4. a claimed act recorded as a denial has its claim settled `denied` with its answer.
 *
 * It answers one row per act: `event`, `exhausted` or `claimed` (already claimed, with the
 * holder's row as it stands after the batch).
 */
export function recordActsFunction(t: (name: string) => string): string {
  return `CREATE FUNCTION ${t("record_acts")}(
      p_claim_keys text[], p_session_keys text[], p_records text[], p_claimed_ats bigint[],
      p_usage_keys text[], p_usage_ids text[], p_max_uses bigint[],
      p_stream_keys text[], p_call_keys text[], p_trace_keys text[], p_bodies text[],
      p_digests text[], p_answers text[], p_settled_ats bigint[]
    ) RETURNS TABLE (
      a_n integer, a_outcome text, a_used bigint, a_record text, a_status text,
      a_settled_at bigint, a_answer text
    ) LANGUAGE plpgsql AS $fn$
    DECLARE
      acts integer := coalesce(array_length(p_claim_keys, 1), 0);
      -- The event each act records: n (its decision), acts + n (exhausted), 0 (claim taken).
      rec integer[] := array_fill(0, ARRAY[acts]);
      uses bigint[] := array_fill(NULL::bigint, ARRAY[acts]);
      won text[] := '{}';
      inserted text[];
      pending text[];
      lost text[];
      present text[];
      counter_keys text[];
      counts bigint[];
      slot integer;
      -- The events linked, in link order: which, at what position, after what, as what.
      linked integer[] := '{}';
      seqs bigint[] := '{}';
      prevs text[] := '{}';
      hashes text[] := '{}';
      m integer := 0;
      i integer;
      ev integer;
      s text;
      head_seq bigint;
      head_hash text;
      link text;
    BEGIN
      IF acts = 0 THEN RETURN; END IF;
      -- 1. Claims.
      pending := ARRAY(SELECT DISTINCT c.k FROM unnest(p_claim_keys) AS c(k)
        WHERE c.k IS NOT NULL ORDER BY c.k);
      FOR attempt IN 1..3 LOOP
        EXIT WHEN cardinality(pending) = 0;
        WITH firsts AS (
          SELECT DISTINCT ON (c.k) c.k, c.n FROM unnest(p_claim_keys) WITH ORDINALITY AS c(k, n)
          JOIN unnest(pending) AS p(k) ON p.k = c.k ORDER BY c.k, c.n
        ), taken AS (
          INSERT INTO ${t("claims")} (key, session_key, record, claimed_at)
          SELECT f.k, p_session_keys[f.n], p_records[f.n], p_claimed_ats[f.n]
          FROM firsts AS f ORDER BY f.k
          ON CONFLICT DO NOTHING RETURNING key
        )
        SELECT coalesce(array_agg(taken.key), '{}') INTO inserted FROM taken;
        won := won || inserted;
        lost := ARRAY(SELECT unnest(pending) EXCEPT SELECT unnest(inserted) ORDER BY 1);
        -- Read, not locked: a lock is a write, and a batch of retries alone would then wait
        -- for a flush it does not need. A holder deleted before the answer reads it (its
        -- session ended meanwhile) comes back without a record; that act fails closed.
        present := ARRAY(SELECT c.key FROM ${t("claims")} AS c WHERE c.key = ANY(lost));
        pending := ARRAY(SELECT unnest(lost) EXCEPT SELECT unnest(present) ORDER BY 1);
      END LOOP;
      IF cardinality(pending) > 0 THEN
        RAISE EXCEPTION 'a claim neither inserted nor read back';
      END IF;
      -- An act goes on when it has no claim, or is the first act of a key this batch inserted.
      rec := ARRAY(
        SELECT CASE WHEN c.k IS NULL OR (w.k IS NOT NULL AND c.n = f.first) THEN c.n::integer
          ELSE 0 END
        FROM unnest(p_claim_keys) WITH ORDINALITY AS c(k, n)
        LEFT JOIN (SELECT d.k, min(d.n) AS first FROM unnest(p_claim_keys) WITH ORDINALITY
          AS d(k, n) GROUP BY d.k) AS f ON f.k = c.k
        LEFT JOIN unnest(won) AS w(k) ON w.k = c.k
        ORDER BY c.n);
      -- 2. Spends: every counter row locked in key order (made at 0 when new), the guard
      -- applied act by act in memory, each changed counter written once.
      WITH locked AS (
        INSERT INTO ${t("usage")} AS u (key, ids, used)
        SELECT DISTINCT ON (x.k) x.k, p_usage_ids[x.n], 0
        FROM unnest(p_usage_keys) WITH ORDINALITY AS x(k, n)
        WHERE x.k IS NOT NULL AND rec[x.n] <> 0 ORDER BY x.k, x.n
        ON CONFLICT (key) DO UPDATE SET used = u.used RETURNING u.key, u.used
      )
      SELECT coalesce(array_agg(locked.key), '{}'), coalesce(array_agg(locked.used), '{}')
        INTO counter_keys, counts FROM locked;
      FOR i IN SELECT x.n FROM unnest(p_usage_keys) WITH ORDINALITY AS x(k, n)
          WHERE x.k IS NOT NULL AND rec[x.n] <> 0 ORDER BY x.n LOOP
        slot := array_position(counter_keys, p_usage_keys[i]);
        IF counts[slot] < p_max_uses[i] THEN
          counts[slot] := counts[slot] + 1;
        ELSE
          rec[i] := acts + i;
        END IF;
        uses[i] := counts[slot];
      END LOOP;
      UPDATE ${t("usage")} AS u SET used = c.used
        FROM unnest(counter_keys, counts) AS c(k, used) WHERE u.key = c.k AND u.used <> c.used;
      -- 3. Events, stream by stream under each head's lock.
      FOR s IN SELECT DISTINCT p_stream_keys[r.e] FROM unnest(rec) AS r(e) WHERE r.e > 0
          ORDER BY 1 LOOP
        SELECT h.seq, h.hash INTO head_seq, head_hash FROM ${t("audit_heads")} AS h
          WHERE h.stream_key = s FOR UPDATE;
        IF NOT FOUND THEN
          INSERT INTO ${t("audit_heads")} (stream_key, seq, hash) VALUES (s, 0, '${GENESIS_HASH}')
            ON CONFLICT DO NOTHING;
          SELECT h.seq, h.hash INTO STRICT head_seq, head_hash FROM ${t("audit_heads")} AS h
            WHERE h.stream_key = s FOR UPDATE;
        END IF;
        FOR ev IN SELECT r.e FROM unnest(rec) WITH ORDINALITY AS r(e, n)
            WHERE r.e > 0 AND p_stream_keys[r.e] = s ORDER BY r.n LOOP
          head_seq := head_seq + 1;
          link := encode(sha256(convert_to('${AUDIT_LINK_DOMAIN}' || E'\\n' || head_seq || E'\\n'
            || head_hash || E'\\n' || p_digests[ev], 'UTF8')), 'hex');
          m := m + 1;
          linked[m] := ev;
          seqs[m] := head_seq;
          prevs[m] := head_hash;
          hashes[m] := link;
          head_hash := link;
        END LOOP;
        UPDATE ${t("audit_heads")} SET seq = head_seq, hash = head_hash WHERE stream_key = s;
      END LOOP;
      -- Inserted in link order, so each stream's rows read back in its chain's order.
      INSERT INTO ${t("audit")} (call_key, trace_key, event)
        SELECT p_call_keys[x.e], p_trace_keys[x.e], '{"seq":' || x.seq || ',"prev":"' || x.prev
          || '","hash":"' || x.hash || '",' || substr(p_bodies[x.e], 2)
        FROM unnest(linked, seqs, prevs, hashes) WITH ORDINALITY AS x(e, seq, prev, hash, m)
        ORDER BY x.m;
      -- 4. Denials settle their claims.
      UPDATE ${t("claims")} AS c SET receipt_status = 'denied', settled_at = d.at, answer = d.answer
        FROM (SELECT p_claim_keys[r.n] AS k, p_settled_ats[r.e] AS at, p_answers[r.e] AS answer
              FROM unnest(rec) WITH ORDINALITY AS r(e, n)
              WHERE r.e > 0 AND p_claim_keys[r.n] IS NOT NULL AND p_answers[r.e] IS NOT NULL) AS d
        WHERE c.key = d.k AND c.receipt_status IS NULL;
      RETURN QUERY
        SELECT r.n::integer, CASE WHEN r.e = 0 THEN 'claimed' WHEN r.e > acts THEN 'exhausted'
            ELSE 'event' END, uses[r.n], c.record, c.receipt_status, c.settled_at, c.answer
        FROM unnest(rec) WITH ORDINALITY AS r(e, n)
        LEFT JOIN ${t("claims")} AS c ON r.e = 0 AND c.key = p_claim_keys[r.n]
        ORDER BY r.n;
    END $fn$`;
}

/**
 * Schema version 6: `record_acts` as in version 4 but for how it reads back a taken claim.
 * The version-4 text joins the claims table to the batch (`LEFT JOIN claims ON r.e = 0 AND
 * c.key = …`); PL/pgSQL keeps a generic plan for it, made while the table was small, and that
 * plan hashes the whole table on every call: once the table had grown past its statistics
 * (before autovacuum analyzed it), each batch scanned every claim (measured: 1.9 → 7.8 ms per
 * act with 50,000 claims, back to 1.7 after ANALYZE). Read back through a LATERAL lookup with a
 * LIMIT (a fence the planner does not flatten), it is one primary-key probe per taken claim
 * whatever the statistics say.
 */
export function recordActsFunctionV6(t: (name: string) => string): string {
  const joined = `LEFT JOIN ${t("claims")} AS c ON r.e = 0 AND c.key = p_claim_keys[r.n]`;
  const probed = `LEFT JOIN LATERAL (
          SELECT h.record, h.receipt_status, h.settled_at, h.answer FROM ${t("claims")} AS h
          WHERE r.e = 0 AND h.key = p_claim_keys[r.n] LIMIT 1
        ) AS c ON true`;
  const v4 = recordActsFunction(t);
  if (!v4.startsWith("CREATE FUNCTION") || !v4.includes(joined)) {
    throw new Error("record_acts v6: the version-4 text changed; write the new step out in full");
  }
  return `CREATE OR REPLACE FUNCTION${v4.slice("CREATE FUNCTION".length).replace(joined, probed)}`;
}
