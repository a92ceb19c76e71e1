/**
 * Writes openapi/openapi.json, the OpenAPI 3.1 document of the REST paths, from the contract:
 * routes and schemas from the generated descriptors (src/openapi/build.ts, over the bridge's own
 * route table), descriptions from the .proto comments, which only `buf build`'s image keeps.
 * Run by `npm run generate` after buf generate; CI runs it and fails when the committed file
 * differs (.ci/run). `--check` exits 1 instead of writing when the file is stale.
 */
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { fromBinary } from "@bufbuild/protobuf";
import { FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import { buildOpenApi } from "../src/openapi/build.js";
import { commentsFromDescriptorSet } from "../src/openapi/comments.js";
import { restServices } from "../src/rpc/routes.js";

const root = fileURLToPath(new URL("..", import.meta.url));
export const OPENAPI_FILE = fileURLToPath(new URL("../openapi/openapi.json", import.meta.url));

const image = execFileSync(fileURLToPath(new URL("../node_modules/.bin/buf", import.meta.url)), ["build", "-o", "-#format=binpb"], { cwd: root, maxBuffer: 64 * 1024 * 1024 });
const comments = commentsFromDescriptorSet(fromBinary(FileDescriptorSetSchema, image));
const { version, license } = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version: string; license: string };
const text = `${JSON.stringify(buildOpenApi(restServices, { version, license, comments: (name) => comments.get(name) }), null, 2)}\n`;

if (process.argv.includes("--check")) {
  let current = "";
  try {
    current = readFileSync(OPENAPI_FILE, "utf8");
  } catch {
    // missing: stale
  }
  if (current !== text) {
    process.stderr.write("openapi/openapi.json is stale: run npm run generate and commit it\n");
    process.exit(1);
  }
} else {
  writeFileSync(OPENAPI_FILE, text);
}
