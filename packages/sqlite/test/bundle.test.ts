import * as backend from "@tessera/sqlite";
import { describeStoreBundleConformance } from "@tessera/testkit";
import { freshFile } from "./helpers.js";

/** The bundle contract every backend shares, against SQLite files. */
describeStoreBundleConformance("sqlite", {
  backend,
  fresh: async () => {
    const file = freshFile();
    return { url: `sqlite:${file.path}`, remove: async () => file.dispose() };
  },
  unreachableUrl: "sqlite:/nonexistent-tessera-directory/tessera.db",
});
