/**
 * The `grpc-message` trailer as gRPC's HTTP/2 protocol spells it: the message's UTF-8 bytes, each
 * byte outside printable ASCII (0x20–0x7E) and `%` itself written as `%XX`; everything else as is.
 * grpc-go, grpc-java and grpc-js's decoder (`decodeURI`) expect exactly this, so `email: must be …`
 * reads as sent, where `encodeURIComponent` would show `email%3A must be …`.
 */
const encoder = new TextEncoder();

export function encodeGrpcMessage(message: string): string {
  let plain = true;
  for (let i = 0; i < message.length; i++) {
    const c = message.charCodeAt(i);
    if (c < 0x20 || c > 0x7e || c === 0x25) {
      plain = false;
      break;
    }
  }
  if (plain) return message;
  let out = "";
  for (const b of encoder.encode(message)) {
    out += b < 0x20 || b > 0x7e || b === 0x25 ? `%${b.toString(16).toUpperCase().padStart(2, "0")}` : String.fromCharCode(b);
  }
  return out;
}

/** The inverse: `%XX` sequences back to bytes, read as UTF-8 (a malformed sequence stays as sent). */
export function decodeGrpcMessage(value: string): string {
  if (!value.includes("%")) return value;
  const bytes: number[] = [];
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c === 0x25 && i + 2 < value.length && /^[0-9A-Fa-f]{2}$/.test(value.slice(i + 1, i + 3))) {
      bytes.push(Number.parseInt(value.slice(i + 1, i + 3), 16));
      i += 2;
    } else {
      for (const b of encoder.encode(value[i] as string)) bytes.push(b);
    }
  }
  return new TextDecoder().decode(new Uint8Array(bytes));
}
