//! A workflow's saga in its state document (`saga` and `compensation_history`), read and
//! written with `state-write`'s protocol: under the file's lock, a corrupt primary quarantined
//! and the last good version (`.bak`, checkpoint) used, the previous version kept as `.bak`.

use crate::core::saga::{CompensationRecord, Saga};
use crate::core::state::Validation;
use crate::exit::Failure;
use crate::store::files::{self, Backup};
use crate::store::ground::Ground;
use crate::store::recovery::{checkpoint_dir, recover};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// The state file of `workflow`'s saga: `state`, else `<root>/sagas/WORKFLOW.json`.
pub fn state_file(g: &Ground, workflow: &str, state: Option<&Path>) -> Result<PathBuf, Failure> {
    if workflow.trim().is_empty() {
        return Err(Failure::usage(
            "the workflow id is empty; name the workflow",
        ));
    }
    Ok(match state {
        Some(f) => f.to_path_buf(),
        None => g
            .root
            .join("sagas")
            .join(format!("{}.json", files::escape_key(workflow))),
    })
}

/// The saga of `workflow` is not in `file`: begin it first.
pub fn not_begun(workflow: &str, file: &Path) -> Failure {
    Failure::data(format!(
        "no saga `{}` in {}; begin it with `triage saga begin {}`",
        workflow,
        file.display(),
        workflow
    ))
}

/// The saga in `doc`, if any; one of another workflow is refused.
pub fn saga_of(doc: &Value, workflow: &str, file: &Path) -> Result<Option<Saga>, Failure> {
    let Some(v) = doc.get("saga") else {
        return Ok(None);
    };
    let saga: Saga = serde_json::from_value(v.clone()).map_err(|e| {
        Failure::data(format!(
            "the `saga` of {} is not a saga ({e}); repair the file or restore {}.bak",
            file.display(),
            file.display()
        ))
    })?;
    if saga.workflow_id != workflow {
        return Err(Failure::data(format!(
            "{} holds the saga of workflow `{}`, not `{workflow}`; name that workflow or another --state file",
            file.display(),
            saga.workflow_id
        )));
    }
    Ok(Some(saga))
}

/// Puts `saga` into the state document (which must be an object), with an empty
/// `compensation_history` if it has none.
pub fn put(doc: &mut Value, saga: &Saga) -> Result<(), Failure> {
    let obj = doc.as_object_mut().ok_or_else(|| {
        Failure::data("the workflow state is not a JSON object; a saga needs an object to live in")
    })?;
    let v = serde_json::to_value(saga)
        .map_err(|e| Failure::data(format!("cannot serialize the saga: {e}")))?;
    obj.insert("saga".into(), v);
    obj.entry("compensation_history").or_insert(json!([]));
    Ok(())
}

/// Appends one compensation record to the document's `compensation_history`.
pub fn push_record(doc: &mut Value, rec: &CompensationRecord) {
    let Some(obj) = doc.as_object_mut() else {
        return;
    };
    let entry = obj.entry("compensation_history").or_insert(json!([]));
    if !entry.is_array() {
        *entry = json!([]);
    }
    if let (Some(list), Ok(v)) = (entry.as_array_mut(), serde_json::to_value(rec)) {
        list.push(v);
    }
}

/// Read-modify-write of the state document under its lock, with `state-write`'s protocol:
/// a corrupt primary is quarantined and the last good version (`.bak`, checkpoint) used.
pub fn update<T>(
    file: &Path,
    g: &Ground,
    f: impl FnOnce(Option<Value>) -> Result<(Value, T), Failure>,
) -> Result<T, Failure> {
    if let Some(dir) = file.parent().filter(|d| !d.as_os_str().is_empty()) {
        files::ensure_dir(dir)?;
    }
    let _lock = files::lock(file, g.lock_wait())?;
    let found = recover(
        file,
        &Validation::shape_only(false),
        &checkpoint_dir(file, None),
        Some(&g.stamp()),
    )?;
    if found.all_invalid() {
        return Err(Failure::data(format!(
            "no valid version of {}; repair it with `triage state-read {}`",
            file.display(),
            file.display()
        )));
    }
    if let Some(src) = found.recovered_from.as_deref().filter(|s| *s != "primary") {
        g.warn(&format!("{} was recovered from {src}", file.display()));
    }
    let (doc, out) = f(found.data)?;
    let mut bytes = serde_json::to_vec_pretty(&doc)
        .map_err(|e| Failure::data(format!("cannot serialize the state: {e}")))?;
    bytes.push(b'\n');
    files::replace(file, &bytes, Backup::Keep)?;
    Ok(out)
}

/// Re-reads the saga under the lock, applies one checkpoint, writes it back.
pub fn checkpoint(
    file: &Path,
    g: &Ground,
    workflow: &str,
    f: impl FnOnce(&mut Saga, &mut Value) -> Result<(), Failure>,
) -> Result<Saga, Failure> {
    update(file, g, |doc| {
        let mut doc = doc.ok_or_else(|| not_begun(workflow, file))?;
        let mut saga = saga_of(&doc, workflow, file)?.ok_or_else(|| not_begun(workflow, file))?;
        f(&mut saga, &mut doc)?;
        put(&mut doc, &saga)?;
        Ok((doc, saga))
    })
}

/// Keeps a copy of the state as it was before compensation: `archive/NAME.STAMP` beside it.
pub fn archive(file: &Path, doc: &Value, g: &Ground) -> Result<PathBuf, Failure> {
    let dir = file
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .join("archive");
    files::ensure_dir(&dir)?;
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "state".into());
    let mut path = dir.join(format!("{name}.{}", g.stamp()));
    let mut n = 1;
    while path.exists() {
        path = dir.join(format!("{name}.{}-{n}", g.stamp()));
        n += 1;
    }
    let mut bytes = serde_json::to_vec_pretty(doc)
        .map_err(|e| Failure::data(format!("cannot serialize the state: {e}")))?;
    bytes.push(b'\n');
    files::replace(&path, &bytes, Backup::Skip)?;
    Ok(path)
}
