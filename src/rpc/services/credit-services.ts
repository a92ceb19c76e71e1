/** Connect implementation of the credit service (DESIGN §14): wire ⇄ domain only. */
import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import type { CreditService } from "../../gen/billing/v1/credit_service_pb.js";

const notYet = () => {
  throw new ConnectError("credits are not built yet", Code.Unimplemented);
};

export function creditService(): ServiceImpl<typeof CreditService> {
  return {
    createCreditGrant: notYet,
    getCreditGrant: notYet,
    listCreditGrants: notYet,
    voidCreditGrant: notYet,
    listCreditLedger: notYet,
    getCreditSettings: notYet,
    updateCreditSettings: notYet,
  };
}
