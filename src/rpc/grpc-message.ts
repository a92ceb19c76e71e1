/**
 * The `grpc-message` trailer as gRPC's HTTP/2 protocol spells it: the message's UTF-8 bytes, each
 * byte outside printable ASCII (0x20–0x7E) and `%` itself written as `%XX`; everything else as is.
 * grpc-go, grpc-java and grpc-js's decoder (`decodeURI`) expect exactly this, so `email: must be …`
 * reads as sent, where `encodeURIComponent` would show `email%3A must be …`.
 */
export function encodeGrpcMessage(message: string): string {
  if (/^[\x20-\x24\x26-\x7e]*$/.test(message)) return message;
  return Buffer.from(message, "utf8")
    .toString("latin1")
    .replace(/[^\x20-\x24\x26-\x7e]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, "0")}`);
}
