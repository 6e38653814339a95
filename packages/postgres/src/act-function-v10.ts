import { recordActsFunctionsV9 } from "./act-function-v9.js";

/**
 * Schema version 10: `record_acts` undoes an act whose spend lost when it came without its
 * `exhausted` event (`ActLedger.undoesLostSpends`). The ledger marks such an act by sending
 * its exhausted slot (`acts + n`) with a NULL digest; an act with a spend and that mark whose
 * guard fails writes nothing at all and answers `lost`:
 *
 * - its claim, inserted by phase 1 a moment before under this same transaction, is not left
 *   behind: when a later act of the batch has the same key (it was held back as `claimed`
 *   because this one inserted the key first), the claim passes to the earliest such act (its
 *   record written over the undone one's) and that act goes on as if it had claimed the key
 *   itself, in arrival order; when none has, the claim row is deleted. So the batch answers
 *   as the same acts one after another would have: the undone act never claimed, and the next
 *   act of its key finds the key free. Acts that may inherit a key (a later act of a key this
 *   batch inserted whose earlier act is marked) have their counters locked with the others,
 *   in key order, so the lock order stays claims, counters, heads;
 * - its counter is left as it was (the guard failed: nothing was added), and it links no
 *   event, so it settles nothing.
 *
 * The single act's path does the same: its claim deleted, `lost` answered. A previous
 * release never sends the mark (its placeholder digest is empty text, not NULL) and gets the
 * same answers as before, so both overloads are replaced, same signatures. An older function
 * given the mark fails closed: a NULL digest makes a NULL link, which the heads' and the
 * audit table's NOT NULL refuse, rolling the batch back.
 * Released text: a change is a new migration step, never an edit of this one.
 */
export function recordActsFunctionsV10(t: (name: string) => string): string[] {
  const steps: [string, string][] = [
    [
      "      used_now bigint;\n",
      `      used_now bigint;
      -- Acts that may inherit the claim of an undone act of their key, and the one that does.
      heirs integer[] := '{}';
      heir integer;
`,
    ],
    [
      "          IF NOT FOUND THEN\n            ev := 2;\n",
      `          IF NOT FOUND THEN
            IF p_digests[2] IS NULL THEN
              -- Undone: the claim just inserted goes with it; nothing else was written.
              IF p_claim_keys[1] IS NOT NULL THEN
                DELETE FROM ${t("claims")} WHERE key = p_claim_keys[1];
              END IF;
              RETURN QUERY SELECT 1, 'lost'::text, NULL::bigint, NULL::text, NULL::text,
                NULL::bigint, NULL::text;
              RETURN;
            END IF;
            ev := 2;
`,
    ],
    [
      "      -- 2. Spends: every counter row locked in key order",
      `      -- Heirs: later acts of a key this batch inserted whose earlier act may be undone.
      IF cardinality(won) < cardinality(array_remove(p_claim_keys, NULL)) THEN
        heirs := ARRAY(SELECT c.n::integer FROM unnest(p_claim_keys) WITH ORDINALITY AS c(k, n)
          WHERE rec[c.n] = 0 AND c.k = ANY(won) AND EXISTS (
            SELECT 1 FROM unnest(p_claim_keys, p_usage_keys) WITH ORDINALITY AS d(k, u, n)
            WHERE d.k = c.k AND d.n < c.n AND d.u IS NOT NULL AND p_digests[acts + d.n] IS NULL)
          ORDER BY c.n);
      END IF;
      -- 2. Spends: every counter row locked in key order`,
    ],
    [
      "WHERE x.k IS NOT NULL AND rec[x.n] <> 0 ORDER BY x.k, x.n",
      "WHERE x.k IS NOT NULL AND (rec[x.n] <> 0 OR x.n = ANY(heirs)) ORDER BY x.k, x.n",
    ],
    [
      `          WHERE x.k IS NOT NULL AND rec[x.n] <> 0 ORDER BY x.n LOOP
`,
      `          WHERE x.k IS NOT NULL AND (rec[x.n] <> 0 OR x.n = ANY(heirs)) ORDER BY x.n LOOP
        -- An heir the claim did not pass to is claimed: it spends nothing.
        CONTINUE WHEN rec[i] = 0;
`,
    ],
    [
      `        ELSE
          rec[i] := acts + i;
        END IF;
        uses[i] := counts[slot];
`,
      `        ELSIF p_digests[acts + i] IS NULL THEN
          -- Undone: no use, no event, and its claim passes to the key's next act or goes.
          rec[i] := -2;
          IF p_claim_keys[i] IS NOT NULL THEN
            heir := (SELECT min(c.n) FROM unnest(p_claim_keys) WITH ORDINALITY AS c(k, n)
              WHERE c.k = p_claim_keys[i] AND c.n > i);
            IF heir IS NULL THEN
              DELETE FROM ${t("claims")} WHERE key = p_claim_keys[i];
            ELSE
              rec[heir] := heir;
              UPDATE ${t("claims")} SET session_key = p_session_keys[heir],
                  record = p_records[heir], claimed_at = p_claimed_ats[heir]
                WHERE key = p_claim_keys[i];
            END IF;
          END IF;
          CONTINUE;
        ELSE
          rec[i] := acts + i;
        END IF;
        uses[i] := counts[slot];
`,
    ],
    [
      "CASE WHEN r.e = 0 THEN 'claimed'",
      "CASE WHEN r.e = 0 THEN 'claimed' WHEN r.e = -2 THEN 'lost'",
    ],
  ];
  return recordActsFunctionsV9(t).map((v9) => {
    let text = v9;
    for (const [before, after] of steps) {
      if (text.split(before).length !== 2) {
        throw new Error(
          "record_acts v10: the version-9 text changed; write the new step out in full",
        );
      }
      text = text.replace(before, after);
    }
    return text;
  });
}
