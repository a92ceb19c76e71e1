import type { MigrationInterface, QueryRunner } from "typeorm";
import { runFor } from "./dialect.js";

/**
 * Subject search (GET /subjects/search, the dashboard's search) over an index that covers it:
 * a substring match of the name or email cannot seek (no index serves `LIKE '%…%'`), so it walks
 * an environment's live subjects in seq order until a page is full. bench:dashboard found a rare
 * term walking 100,000 rows, each looked up by its primary key (p99 280 ms); over
 * ix_subjects_env_live_search (environment, deleted_at, seq, name, email) the walk reads index
 * entries alone, then only the page's rows are read (a deferred join, subject-store.ts).
 */
const MYSQL_UP = ["CREATE INDEX `ix_subjects_env_live_search` ON `subjects` (`environment_id`, `deleted_at`, `seq`, `name`, `email`)"];
const MYSQL_DOWN = ["DROP INDEX `ix_subjects_env_live_search` ON `subjects`"];
const SQLITE_UP = ['CREATE INDEX "ix_subjects_env_live_search" ON "subjects" ("environment_id", "deleted_at", "seq", "name", "email")'];
const SQLITE_DOWN = ['DROP INDEX "ix_subjects_env_live_search"'];

export class SubjectSearch1795000000018 implements MigrationInterface {
  name = "SubjectSearch1795000000018";

  async up(q: QueryRunner): Promise<void> {
    await runFor(q, MYSQL_UP, SQLITE_UP);
  }

  async down(q: QueryRunner): Promise<void> {
    await runFor(q, MYSQL_DOWN, SQLITE_DOWN);
  }
}
