/**
 * `test` for a test of MariaDB alone (races, column types, outages): it runs when TEST_STORES
 * selects mysql and is reported as skipped otherwise, never as passed without having run.
 */
import test from "ava";
import { STORES } from "./db.js";

export const mysqlOnly = STORES.includes("mysql") ? test : test.skip;
