//! `kubectl get` tables, as the API server itself makes them: kubectl asks for a list with
//! `Accept: application/json;as=Table;v=v1;g=meta.k8s.io` and the server answers with the
//! columns and cells it prints (a Service's EXTERNAL-IP and PORT(S), a CRD's
//! `additionalPrinterColumns`). The lab asks the same way and lays the table out as kubectl
//! does: upper-case headers, the default (priority 0) columns, three spaces between columns.

use serde::Deserialize;

/// The media type kubectl sends for server-side printing (JSON as the fallback).
const TABLE_ACCEPT: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";

/// A `meta.k8s.io/v1` Table, as much of it as is printed.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Table {
    /// The columns, in order.
    #[serde(default)]
    pub(super) column_definitions: Vec<Column>,
    /// One row per object.
    #[serde(default)]
    pub(super) rows: Vec<Row>,
}

/// A column of a [`Table`].
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(super) struct Column {
    /// Its title ("Name", "External-IP", "Allocated Node").
    pub(super) name: String,
    /// 0 for the default view; higher ones only with `-o wide`.
    #[serde(default)]
    pub(super) priority: i32,
}

/// A row of a [`Table`].
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(super) struct Row {
    /// One cell per column: strings, numbers, booleans or null.
    #[serde(default)]
    pub(super) cells: Vec<serde_json::Value>,
}

/// Lists `path` (e.g. `/api/v1/namespaces/demo/services`) as a Table.
pub(super) async fn get(client: &kube::Client, path: &str) -> Result<Table, String> {
    let request = http::Request::get(path)
        .header(http::header::ACCEPT, TABLE_ACCEPT)
        .body(Vec::new())
        .map_err(|e| format!("GET {path}: {e}"))?;
    let text = client
        .request_text(request)
        .await
        .map_err(|e| format!("GET {path}: {e}"))?;
    serde_json::from_str(&text).map_err(|e| format!("GET {path}: not a Table: {e}"))
}

/// The table as `kubectl get` prints it; "No resources found." when it has no rows.
pub(super) fn render(table: &Table) -> String {
    if table.rows.is_empty() {
        return "No resources found.\n".into();
    }
    let shown: Vec<usize> = (0..table.column_definitions.len())
        .filter(|&i| table.column_definitions[i].priority == 0)
        .collect();
    let mut lines: Vec<Vec<String>> = vec![
        shown
            .iter()
            .map(|&i| table.column_definitions[i].name.to_uppercase())
            .collect(),
    ];
    for row in &table.rows {
        lines.push(
            shown
                .iter()
                .map(|&i| row.cells.get(i).map_or_else(String::new, cell))
                .collect(),
        );
    }
    let widths: Vec<usize> = (0..shown.len())
        .map(|c| lines.iter().map(|l| l[c].len()).max().unwrap_or(0))
        .collect();
    let mut text = String::new();
    for line in &lines {
        let mut out = String::new();
        for (c, value) in line.iter().enumerate() {
            if c + 1 == line.len() {
                out.push_str(value);
            } else {
                out.push_str(&format!("{value:<width$}   ", width = widths[c]));
            }
        }
        text.push_str(out.trim_end());
        text.push('\n');
    }
    text
}

/// A cell as kubectl prints it: strings bare, null as `<none>`, anything else as JSON.
fn cell(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => "<none>".into(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_prints_its_default_columns_aligned_as_kubectl_does() {
        // The shape the API server sends for `kubectl get services` (trimmed).
        let table: Table = serde_json::from_value(serde_json::json!({
            "kind": "Table",
            "apiVersion": "meta.k8s.io/v1",
            "columnDefinitions": [
                {"name": "Name", "type": "string", "format": "name", "priority": 0},
                {"name": "Type", "type": "string", "priority": 0},
                {"name": "External-IP", "type": "string", "priority": 0},
                {"name": "Selector", "type": "string", "priority": 1},
                {"name": "Ready", "type": "boolean", "priority": 0},
            ],
            "rows": [
                {"cells": ["web", "LoadBalancer", "198.18.0.200", "app=web", true]},
                {"cells": ["a-longer-name", "ClusterIP", null, "<none>", false]},
            ],
        }))
        .unwrap();
        assert_eq!(
            render(&table),
            "NAME            TYPE           EXTERNAL-IP    READY\n\
             web             LoadBalancer   198.18.0.200   true\n\
             a-longer-name   ClusterIP      <none>         false\n"
        );
        assert_eq!(render(&Table::default()), "No resources found.\n");
    }
}
