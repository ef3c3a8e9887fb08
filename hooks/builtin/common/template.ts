// Names in params may depend on the Revision: "{{service}}-db" binds each Service its own Secret.

export interface TemplateValues {
  revision: string;
  namespace: string;
  service?: string;
  configuration?: string;
}

const KEYS = ['revision', 'service', 'configuration', 'namespace'];

/** Replaces {{revision}}, {{service}}, {{configuration}} and {{namespace}}; an unknown or empty one is an error. */
export function render(template: string, values: TemplateValues): { value: string } | { error: string } {
  const missing: string[] = [];
  const value = template.replace(/\{\{\s*([A-Za-z]+)\s*\}\}/g, (whole, key: string) => {
    if (!KEYS.includes(key)) {
      missing.push(`{{${key}}} (not a placeholder: use ${KEYS.map((k) => `{{${k}}}`).join(', ')})`);
      return whole;
    }
    const v = values[key as keyof TemplateValues];
    if (!v) {
      missing.push(`{{${key}}} (the Revision has no ${key})`);
      return whole;
    }
    return v;
  });
  return missing.length > 0 ? { error: `cannot fill ${missing.join(', ')} in "${template}"` } : { value };
}
