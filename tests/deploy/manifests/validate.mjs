// Validates KEDA manifests against KEDA's CRD schemas (@kubernetes-models/keda, generated
// from KEDA's own CRDs). Usage: node validate.mjs FILE.yaml… — exits 1 naming each
// document that fails, 0 when all pass.
import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";
import { ScaledObject } from "@kubernetes-models/keda/keda.sh/v1alpha1/ScaledObject";
import { ScaledJob } from "@kubernetes-models/keda/keda.sh/v1alpha1/ScaledJob";
import { TriggerAuthentication } from "@kubernetes-models/keda/keda.sh/v1alpha1/TriggerAuthentication";

const kinds = { ScaledObject, ScaledJob, TriggerAuthentication };
let failed = 0;
for (const file of process.argv.slice(2)) {
  for (const document of parseAllDocuments(readFileSync(file, "utf8"))) {
    const manifest = document.toJS();
    if (!manifest) continue;
    const Model = manifest.apiVersion === "keda.sh/v1alpha1" ? kinds[manifest.kind] : undefined;
    const name = `${file}: ${manifest.kind}/${manifest.metadata?.name}`;
    if (!Model) {
      console.error(`${name}: not a KEDA kind this checks`);
      failed += 1;
      continue;
    }
    try {
      new Model(manifest).validate();
      console.log(`${name}: valid`);
    } catch (error) {
      console.error(`${name}: ${error.message}`);
      failed += 1;
    }
  }
}
process.exit(failed ? 1 : 0);
