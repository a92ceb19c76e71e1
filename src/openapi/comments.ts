/** The .proto comments of `buf build`'s image, by full name (the generated code keeps none). */
import type { FileDescriptorSet, SourceCodeInfo_Location } from "@bufbuild/protobuf/wkt";

/**
 * The comments of a FileDescriptorSet with source info (`buf build`'s image), by full name:
 * leading comments, else trailing, with the comment markers' leading space removed.
 */
export function commentsFromDescriptorSet(set: FileDescriptorSet): Map<string, string> {
  const out = new Map<string, string>();
  for (const file of set.file) {
    const locations = new Map<string, SourceCodeInfo_Location>();
    for (const loc of file.sourceCodeInfo?.location ?? []) locations.set(loc.path.join("."), loc);
    const text = (path: number[]): string | undefined => {
      const loc = locations.get(path.join("."));
      const raw = (loc?.leadingComments || loc?.trailingComments || "").trim();
      if (!raw) return undefined;
      return raw
        .split("\n")
        .map((l) => l.replace(/^ /, "").trimEnd())
        .join("\n")
        .trim();
    };
    const put = (name: string, path: number[]) => {
      const t = text(path);
      if (t) out.set(name, t);
    };
    const pkg = file.package ? `${file.package}.` : "";
    const messages = (list: typeof file.messageType, prefix: string, path: number[]) => {
      list.forEach((m, i) => {
        const name = `${prefix}${m.name}`;
        const p = [...path, i];
        put(name, p);
        m.field.forEach((f, j) => {
          put(`${name}.${f.name}`, [...p, 2, j]);
        });
        messages(m.nestedType, `${name}.`, [...p, 3]);
      });
    };
    messages(file.messageType, pkg, [4]);
    file.service.forEach((s, i) => {
      put(`${pkg}${s.name}`, [6, i]);
      s.method.forEach((m, j) => {
        put(`${pkg}${s.name}.${m.name}`, [6, i, 2, j]);
      });
    });
  }
  return out;
}
