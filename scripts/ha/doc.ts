/**
 * The configuration blocks docs/operations/high-availability.md quotes, generated from config.ts
 * with the documented ports; docMismatch() says when the document no longer quotes them exactly.
 * `npx tsx scripts/ha/doc.ts` prints the blocks, to paste when config.ts changes.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { REPO_ROOT } from "../../bench/lib.js";
import { DOC_FRONT, DOC_PORTS, type NodePorts, haproxyConfig, nodeOptions } from "./config.js";

export const DOC_PATH = join(REPO_ROOT, "docs/operations/high-availability.md");

/** A node's mariadbd command line as the document shows it (one option a line). */
export function nodeCommand(node: NodePorts, bootstrap: boolean): string {
  const opts = nodeOptions(node, DOC_PORTS, `/var/lib/galera/node${node.n}`).map((o) => (o.includes(";") ? o.replace(/=(.*)$/, "='$1'") : o));
  if (bootstrap) opts.push("--wsrep-new-cluster");
  return ["mariadbd \\", ...opts.map((o, i) => `  ${o}${i < opts.length - 1 ? " \\" : ""}`)].join("\n");
}

/** The fenced blocks the document must hold. */
export function docBlocks(): string[] {
  return [`\`\`\`console\n${nodeCommand(DOC_PORTS[0] as NodePorts, true)}\n\`\`\``, `\`\`\`text\n${haproxyConfig(DOC_FRONT, DOC_PORTS).trimEnd()}\n\`\`\``];
}

/** Why the document does not quote the harness's configuration, or undefined when it does. */
export function docMismatch(): string | undefined {
  let text: string;
  try {
    text = readFileSync(DOC_PATH, "utf8");
  } catch {
    return "missing";
  }
  const missing = docBlocks().filter((b) => !text.includes(b));
  return missing.length === 0 ? undefined : `does not quote the harness's configuration (${missing.length} block(s) differ; print them with npx tsx scripts/ha/doc.ts)`;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) process.stdout.write(`${docBlocks().join("\n\n")}\n`);
