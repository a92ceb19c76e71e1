/**
 * The operator CLI's entry point (run.ts has the commands, their help and exit codes):
 *
 *   npm run billing -- migrate status | migrate up
 *   npm run billing -- status
 *   npm run billing -- subscriptions retry-failed [--env <name|id>] [--subscription <id>]
 *   npm run billing -- invoices finalize|void|mark-uncollectible <invoice_id> [--env <name|id>]
 *   npm run billing -- keys env create|list|set-limits|set-invoice-grace …
 *   npm run billing -- keys create|list|revoke …
 *   npm run billing -- [<command>…] --help
 *
 * `npm run billing` runs the compiled CLI (dist/cli/billing.js, built first); in development
 * `npx tsx src/cli/billing.ts …` runs the sources.
 */
import { pathToFileURL } from "node:url";
import { run } from "./run.js";

export { parseArgs, run, usage } from "./run.js";

// Run as a command; imported (tests of parseArgs and run), it does nothing.
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) process.exitCode = await run(process.argv.slice(2));
