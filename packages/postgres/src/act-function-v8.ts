import { recordActsFunctionV7 } from "./act-function-v7.js";

/**
 * Schema version 8: `record_acts` checks the grant versions an act was decided on. A kernel
 * whose turn cache holds a holder's grants decides on them without reading their version
 * first and sends the versions with the act (`Act.versions`); the function compares each with
 * `grant_versions` before anything else, and an act whose version moved writes nothing and
 * answers `stale` (the kernel reads the grants and decides again). So a warm act is one round
 * trip, not a version read and then the act.
 *
 * The check reads the version rows without locking them: a revocation that committed before
 * the statement's snapshot is always seen; one that commits while the batch runs is ordered
 * after it (its act was decided before the revocation, as one that took its turn a moment
 * earlier would have been). A lock would make every act wait on the grant changes of its
 * holder and write a lock on each version row it reads.
 *
 * A new overload beside version 7's (four more arrays: the act each check belongs to, and the
 * holder's namespace and subject digests and the version). The ledger calls it only for a
 * batch with checks; version 7's, kept, serves the rest, and a process of the previous release
 * while the new one rolls out.
 * Released text: a change is a new migration step, never an edit of this one.
 */
export function recordActsFunctionV8(t: (name: string) => string): string {
  const steps: [string, string][] = [
    [
      "p_answers text[], p_settled_ats bigint[]\n",
      `p_answers text[], p_settled_ats bigint[], p_check_acts integer[],
      p_check_namespaces text[], p_check_subjects text[], p_check_versions text[]
`,
    ],
    [
      "      won text[] := '{}';\n",
      `      won text[] := '{}';
      -- Acts whose grant versions moved: they write nothing and answer 'stale'.
      stale integer[] := '{}';
`,
    ],
    [
      "      IF acts = 0 THEN RETURN; END IF;\n",
      `      IF acts = 0 THEN RETURN; END IF;
      -- 0. Versions: an act decided on grants whose version moved takes no part in the batch.
      IF cardinality(p_check_acts) > 0 THEN
        stale := ARRAY(SELECT DISTINCT v.n FROM unnest(p_check_acts, p_check_namespaces,
            p_check_subjects, p_check_versions) AS v(n, ns, sub, ver)
          LEFT JOIN LATERAL (SELECT g.salt || '.' || g.bumps AS now FROM ${t("grant_versions")} AS g
            WHERE g.namespace_key = v.ns AND g.subject_key = v.sub LIMIT 1) AS g ON true
          WHERE coalesce(g.now, '0') <> v.ver ORDER BY 1);
        FOREACH i IN ARRAY stale LOOP
          p_claim_keys[i] := NULL;
          p_usage_keys[i] := NULL;
        END LOOP;
      END IF;
`,
    ],
    [
      "        ORDER BY c.n);\n      END IF;\n",
      `        ORDER BY c.n);
      END IF;
      FOREACH i IN ARRAY stale LOOP
        rec[i] := -1;
      END LOOP;
`,
    ],
    [
      "CASE WHEN r.e = 0 THEN 'claimed' WHEN r.e > acts",
      "CASE WHEN r.e = 0 THEN 'claimed' WHEN r.e < 0 THEN 'stale' WHEN r.e > acts",
    ],
  ];
  let text = recordActsFunctionV7(t);
  for (const [before, after] of steps) {
    if (text.split(before).length !== 2) {
      throw new Error("record_acts v8: the version-7 text changed; write the new step out in full");
    }
    text = text.replace(before, after);
  }
  return text;
}
