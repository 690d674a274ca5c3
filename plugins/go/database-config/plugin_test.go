package databaseconfig

import (
	"strings"
	"testing"

	"wasmop.dev/wasmop"
	"wasmop.dev/wasmop/wasmoptest"
)

// The reconciler run natively over the SDK's fake host: the golden cases
// (tests/go/tests/golden.rs) run the built component; this is the quick loop an author
// edits against.
func TestReconcileAppliesTheConfigMapAndRecordsReadyOnce(t *testing.T) {
	db := &Database{
		TypeMeta:   wasmop.TypeMeta{APIVersion: "demo.wasmop.dev/v1", Kind: "Database"},
		ObjectMeta: wasmop.ObjectMeta{Name: "orders", Namespace: "shop", UID: "u-1", Generation: 1},
		Spec:       DatabaseSpec{Engine: "postgres", Host: "db", Port: 5432, Replicas: 2},
	}
	host := wasmoptest.NewHost()
	ref, _ := wasmop.RefOf(db)
	if _, err := (DatabaseConfig{}).Reconcile(wasmop.NewContext(host, ref), db); err != nil {
		t.Fatal(err)
	}
	if len(host.Writes) != 3 {
		t.Fatalf("want apply, patch-status and event, got %+v", host.Writes)
	}
	apply := host.Writes[0]
	if apply.Call != "apply" || apply.Target != "ConfigMap shop/orders-config" ||
		!strings.Contains(apply.Body, `"url":"postgres://db:5432"`) {
		t.Fatalf("apply: %+v", apply)
	}
	if status := host.Writes[1]; status.Call != "patch-status" || !strings.Contains(status.Body, `"observedGeneration":1`) {
		t.Fatalf("status: %+v", status)
	}

	// Reconciled again with the status it wrote: the ConfigMap is applied, nothing else.
	generation := int64(1)
	db.Status = &DatabaseStatus{ObservedGeneration: &generation, Conditions: []wasmop.Condition{
		wasmop.NewCondition("Ready", true, "ConfigApplied", "ConfigMap orders-config is up to date", 1),
	}}
	host.Writes = nil
	if _, err := (DatabaseConfig{}).Reconcile(wasmop.NewContext(host, ref), db); err != nil {
		t.Fatal(err)
	}
	if len(host.Writes) != 1 || host.Writes[0].Call != "apply" {
		t.Fatalf("want only the apply, got %+v", host.Writes)
	}
}

// An engine outside the CRD's enum fails to decode, as it does for the Rust plugin: a
// permanent error naming the engines, and no writes (the golden case
// unknown-engine-is-permanent runs the built component).
func TestAnUnknownEngineIsAPermanentDecodeError(t *testing.T) {
	host := wasmoptest.NewHost()
	ref, err := DatabaseKind.Ref("shop", "orders")
	if err != nil {
		t.Fatal(err)
	}
	_, failure := wasmop.Serve(host, false, ref, `{"apiVersion":"demo.wasmop.dev/v1","kind":"Database",`+
		`"metadata":{"name":"orders","namespace":"shop","uid":"u-1"},`+
		`"spec":{"engine":"oracle","host":"db","port":1521,"replicas":1}}`)
	want := "cannot decode Database shop/orders from the host as demo.wasmop.dev/v1/Database: " +
		"unknown variant `oracle`, expected one of `postgres`, `mysql`, `mariadb`"
	if failure == nil || failure.Retryable || failure.Message != want {
		t.Fatalf("want the permanent error %q, got %+v", want, failure)
	}
	if len(host.Writes) != 0 {
		t.Fatalf("want no writes, got %+v", host.Writes)
	}
}
