/**
 * `billing keys …` by another name: `node src/cli/keys.ts <args>` (compiled:
 * dist/cli/keys.js) is exactly `billing keys <args>` (keys-commands.ts has the commands), as
 * `npm run keys -- <args>` is `npm run billing -- keys <args>`.
 */
import { pathToFileURL } from "node:url";
import { run } from "./run.js";

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) process.exitCode = await run(["keys", ...process.argv.slice(2)]);
