import type { DataSource, Repository } from "typeorm";
import { AlreadyExistsError } from "../../billing/errors.js";
import type { Page, PageResult } from "../../billing/pagination.js";
import { toPageResult } from "../../billing/pagination.js";
import type { Subject, SubjectPatch, SubjectStore } from "../../billing/subjects.js";
import type { Entities, SubjectRow } from "../entities/index.js";
import { isUniqueViolation } from "../errors.js";

function toSubject(r: SubjectRow): Subject {
  return {
    id: r.id,
    environmentId: r.environment_id,
    createdAt: r.created_at,
    email: r.email,
    externalId: r.external_id,
    metadata: r.metadata ?? {},
    name: r.name,
  };
}

/** `%`, `_` and the escape character itself are literal in a search query. */
function likePattern(query: string): string {
  return `%${query.toLowerCase().replace(/[!%_]/g, (c) => `!${c}`)}%`;
}

export class SqlSubjectStore implements SubjectStore {
  private readonly repo: Repository<SubjectRow>;
  constructor(dataSource: DataSource, entities: Entities) {
    this.repo = dataSource.getRepository(entities.Subject);
  }

  async insert(s: Subject): Promise<void> {
    try {
      await this.repo.insert({
        id: s.id,
        environment_id: s.environmentId,
        external_id: s.externalId,
        external_id_key: s.externalId,
        email: s.email,
        name: s.name,
        metadata: s.metadata,
        created_at: s.createdAt,
        updated_at: s.createdAt,
        deleted_at: null,
      });
    } catch (err) {
      if (isUniqueViolation(err)) {
        throw new AlreadyExistsError("SUBJECT_EXTERNAL_ID_EXISTS", `a subject with external_id ${JSON.stringify(s.externalId)} already exists`, {
          external_id: s.externalId ?? "",
        });
      }
      throw err;
    }
  }

  async findByIdOrExternalId(environmentId: string, key: string): Promise<Subject | undefined> {
    const rows = await this.repo
      .createQueryBuilder("s")
      .where("s.environment_id = :env AND s.deleted_at IS NULL AND (s.id = :key OR s.external_id_key = :key)", { env: environmentId, key })
      .limit(2)
      .getMany();
    // An ID match wins over an external-ID match (an external ID may look like another subject's ID).
    const row = rows.find((r) => r.id === key) ?? rows[0];
    return row ? toSubject(row) : undefined;
  }

  async update(environmentId: string, id: string, patch: SubjectPatch, at: Date): Promise<Subject | undefined> {
    const set: Partial<SubjectRow> = { updated_at: at };
    if (patch.email !== undefined) set.email = patch.email;
    if (patch.name !== undefined) set.name = patch.name;
    if (patch.metadata !== undefined) set.metadata = patch.metadata;
    await this.repo
      .createQueryBuilder()
      .update()
      .set(set)
      .where("environment_id = :env AND id = :id AND deleted_at IS NULL", { env: environmentId, id })
      .execute();
    const row = await this.repo.findOneBy({ environment_id: environmentId, id });
    return row && row.deleted_at === null ? toSubject(row) : undefined;
  }

  async list(environmentId: string, page: Page): Promise<PageResult<Subject>> {
    const rows = await this.repo
      .createQueryBuilder("s")
      .where("s.environment_id = :env AND s.deleted_at IS NULL", { env: environmentId })
      .orderBy("s.seq", "ASC")
      .limit(page.limit + 1)
      .offset(page.offset)
      .getMany();
    return toPageResult(rows.map(toSubject), page);
  }

  async search(environmentId: string, query: string, page: Page): Promise<PageResult<Subject>> {
    const rows = await this.repo
      .createQueryBuilder("s")
      .where("s.environment_id = :env AND s.deleted_at IS NULL", { env: environmentId })
      .andWhere("(LOWER(s.name) LIKE :p ESCAPE '!' OR LOWER(s.email) LIKE :p ESCAPE '!')", { p: likePattern(query) })
      .orderBy("s.seq", "ASC")
      .limit(page.limit + 1)
      .offset(page.offset)
      .getMany();
    return toPageResult(rows.map(toSubject), page);
  }

  async softDelete(environmentId: string, id: string, at: Date): Promise<boolean> {
    const res = await this.repo
      .createQueryBuilder()
      .update()
      .set({ deleted_at: at, updated_at: at, external_id_key: null })
      .where("environment_id = :env AND id = :id AND deleted_at IS NULL", { env: environmentId, id })
      .execute();
    return (res.affected ?? 0) > 0;
  }
}
