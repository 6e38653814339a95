import { AUDIT_LINK_DOMAIN, GENESIS_HASH } from "@tessera/core/store-kit";

/**
 * `withdraw_act`, the server-side function that withdraws one act in the one statement that
 * calls it (schema version 5, `migrations.ts`; see `ActLedger.withdraw`). Released text: a
 * change is a new migration step, never an edit of this one.
 *
 * It takes its row locks in `record_acts`' order, table by table (the claim, then the
 * counter, then the stream's head), so a withdrawal and a batch of acts cannot deadlock:
 *
 * 1. the claim row is locked `FOR UPDATE`: absent → `not_recorded`; settled, or holding
 *    another record (body hash, `claimed_at` or worker differ) → `kept`; nothing written.
 *    Concurrent withdrawals of one act queue on this lock, and each one after the first
 *    reads the claim the first settled: one `withdrawn`, the others `kept`;
 * 2. the claim is settled `failed` with the withdrawal's answer;
 * 3. the act's counter, when it spent one, gives one use back (never below zero);
 * 4. the event is linked under its stream's head lock exactly as `record_acts` links
 *    (`sha256(domain \n seq \n prev \n digest)`, from the content digest the client sends),
 *    the head moved and the event inserted with its chain fields.
 *
 * The record is compared as the text the client sends (`record_acts` and the claim store
 * spell a record the same way), and, when spelled otherwise (another writer's JSON), field by
 * field as `jsonb` (body hash and worker; `claimed_at` is a column) unless either holds a NUL
 * (`\u0000`, which `jsonb` cannot read: then it is another record, and kept). Each test is a
 * statement of its own, so `jsonb` never reads a record that holds one.
 */
export function withdrawActFunction(t: (name: string) => string): string {
  return `CREATE FUNCTION ${t("withdraw_act")}(
      p_claim_key text, p_record text, p_claimed_at bigint,
      p_usage_key text, p_stream_key text, p_call_key text, p_trace_key text,
      p_body text, p_digest text, p_answer text, p_settled_at bigint
    ) RETURNS text LANGUAGE plpgsql AS $fn$
    DECLARE
      held_record text;
      held_at bigint;
      held_status text;
      head_seq bigint;
      head_hash text;
      link text;
    BEGIN
      -- 1. The claim, locked: the act's own record, still unsettled, or nothing is written.
      SELECT c.record, c.claimed_at, c.receipt_status INTO held_record, held_at, held_status
        FROM ${t("claims")} AS c WHERE c.key = p_claim_key FOR UPDATE;
      IF NOT FOUND THEN RETURN 'not_recorded'; END IF;
      IF held_status IS NOT NULL OR held_at <> p_claimed_at THEN RETURN 'kept'; END IF;
      IF held_record <> p_record THEN
        IF strpos(held_record, '\\u0000') > 0 OR strpos(p_record, '\\u0000') > 0 THEN
          RETURN 'kept';
        END IF;
        IF (held_record::jsonb -> 'bodyHash') IS DISTINCT FROM (p_record::jsonb -> 'bodyHash')
            OR (held_record::jsonb -> 'worker') IS DISTINCT FROM (p_record::jsonb -> 'worker') THEN
          RETURN 'kept';
        END IF;
      END IF;
      -- 2. Settled failed, with the answer every retry of the call ID reads back.
      UPDATE ${t("claims")} SET receipt_status = 'failed', settled_at = p_settled_at,
        answer = p_answer WHERE key = p_claim_key;
      -- 3. The use given back, never below zero.
      IF p_usage_key IS NOT NULL THEN
        UPDATE ${t("usage")} SET used = used - 1 WHERE key = p_usage_key AND used > 0;
      END IF;
      -- 4. The event, linked under the stream's head lock.
      SELECT h.seq, h.hash INTO head_seq, head_hash FROM ${t("audit_heads")} AS h
        WHERE h.stream_key = p_stream_key FOR UPDATE;
      IF NOT FOUND THEN
        INSERT INTO ${t("audit_heads")} (stream_key, seq, hash)
          VALUES (p_stream_key, 0, '${GENESIS_HASH}') ON CONFLICT DO NOTHING;
        SELECT h.seq, h.hash INTO STRICT head_seq, head_hash FROM ${t("audit_heads")} AS h
          WHERE h.stream_key = p_stream_key FOR UPDATE;
      END IF;
      head_seq := head_seq + 1;
      link := encode(sha256(convert_to('${AUDIT_LINK_DOMAIN}' || E'\\n' || head_seq || E'\\n'
        || head_hash || E'\\n' || p_digest, 'UTF8')), 'hex');
      UPDATE ${t("audit_heads")} SET seq = head_seq, hash = link WHERE stream_key = p_stream_key;
      INSERT INTO ${t("audit")} (call_key, trace_key, event)
        VALUES (p_call_key, p_trace_key, '{"seq":' || head_seq || ',"prev":"' || head_hash
          || '","hash":"' || link || '",' || substr(p_body, 2));
      RETURN 'withdrawn';
    END $fn$`;
}
