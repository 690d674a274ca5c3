// Command database-config-cr is the controller-runtime contender of wasmop's benchmarks
// (bench/run): the logic of plugins/rust/database-config written the way a controller-runtime
// user would. Each Database (demo.wasmop.dev/v1) gets a server-side-applied ConfigMap
// "<name>-config" that it owns, and a Ready condition with observedGeneration in its status;
// the status is patched, and an Event recorded, only when it changes.
//
// Like wasmop's defaults: 4 reconciles at once, a change of a Database that does not bump
// its generation does not trigger a reconcile, owned ConfigMaps do. It prints "ready" on
// stdout once its caches are synced, which is what bench/run times.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

const fieldManager = "bench/database-config"

var databaseGVK = schema.GroupVersionKind{Group: "demo.wasmop.dev", Version: "v1", Kind: "Database"}

type reconciler struct {
	client   client.Client
	recorder events.EventRecorder
}

func newDatabase() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(databaseGVK)
	return u
}

func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	db := newDatabase()
	if err := r.client.Get(ctx, req.NamespacedName, db); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	engine, _, _ := unstructured.NestedString(db.Object, "spec", "engine")
	host, _, _ := unstructured.NestedString(db.Object, "spec", "host")
	port, _, _ := unstructured.NestedInt64(db.Object, "spec", "port")
	replicas, _, _ := unstructured.NestedInt64(db.Object, "spec", "replicas")
	name := db.GetName() + "-config"

	cm := corev1ac.ConfigMap(name, db.GetNamespace()).
		WithOwnerReferences(metav1ac.OwnerReference().
			WithAPIVersion(databaseGVK.GroupVersion().String()).
			WithKind(databaseGVK.Kind).
			WithName(db.GetName()).
			WithUID(db.GetUID()).
			WithController(true).
			WithBlockOwnerDeletion(true)).
		WithData(map[string]string{
			"engine":   engine,
			"host":     host,
			"port":     fmt.Sprint(port),
			"replicas": fmt.Sprint(replicas),
			"url":      fmt.Sprintf("%s://%s:%d", engine, host, port),
		})
	if err := r.client.Apply(ctx, cm, client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
		return ctrl.Result{}, fmt.Errorf("apply ConfigMap %s/%s: %w", db.GetNamespace(), name, err)
	}

	oldStatus, _, _ := unstructured.NestedMap(db.Object, "status")
	var conditions []metav1.Condition
	if raw, ok, _ := unstructured.NestedSlice(db.Object, "status", "conditions"); ok {
		u := map[string]any{"items": raw}
		var holder struct {
			Items []metav1.Condition `json:"items"`
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u, &holder); err == nil {
			conditions = holder.Items
		}
	}
	message := fmt.Sprintf("ConfigMap %s is up to date", name)
	meta.SetStatusCondition(&conditions, metav1.Condition{
		Type:               "Ready",
		Status:             metav1.ConditionTrue,
		Reason:             "ConfigApplied",
		Message:            message,
		ObservedGeneration: db.GetGeneration(),
	})
	condList := make([]any, 0, len(conditions))
	for _, c := range conditions {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&c)
		if err != nil {
			return ctrl.Result{}, err
		}
		condList = append(condList, m)
	}
	newStatus := map[string]any{
		"conditions":         condList,
		"observedGeneration": db.GetGeneration(),
	}
	if reflect.DeepEqual(normalize(oldStatus), normalize(newStatus)) {
		return ctrl.Result{}, nil
	}
	patch := &unstructured.Unstructured{Object: map[string]any{"status": newStatus}}
	patch.SetGroupVersionKind(databaseGVK)
	body, err := patch.MarshalJSON()
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.client.Status().Patch(ctx, db, client.RawPatch("application/merge-patch+json", body)); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("patch status of Database %s/%s: %w", db.GetNamespace(), db.GetName(), err)
	}
	r.recorder.Eventf(db, nil, corev1.EventTypeNormal, "ConfigApplied", "Apply", "%s", message)
	return ctrl.Result{}, nil
}

// normalize gives both statuses the same JSON number types, so equal statuses compare equal.
func normalize(m map[string]any) any {
	if m == nil {
		return nil
	}
	u := &unstructured.Unstructured{Object: map[string]any{"s": m}}
	b, err := u.MarshalJSON()
	if err != nil {
		return m
	}
	out := &unstructured.Unstructured{}
	if err := out.UnmarshalJSON(append([]byte(`{"apiVersion":"v1","kind":"X",`), b[1:]...)); err != nil {
		return m
	}
	return out.Object["s"]
}

func main() {
	concurrency := flag.Int("concurrency", 4, "reconciles at once (wasmop's default per plugin)")
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseDevMode(false)))

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		fail(err)
	}
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:  scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		// Reads of the unstructured Database come from the informer cache, as typed ones do
		// (controller-runtime sends unstructured reads to the API server unless told).
		Client: client.Options{Cache: &client.CacheOptions{Unstructured: true}},
	})
	if err != nil {
		fail(err)
	}
	r := &reconciler{client: mgr.GetClient(), recorder: mgr.GetEventRecorder(fieldManager)}
	err = ctrl.NewControllerManagedBy(mgr).
		Named("database-config").
		For(newDatabase(), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&corev1.ConfigMap{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: *concurrency}).
		Complete(r)
	if err != nil {
		fail(err)
	}
	ctx := ctrl.SetupSignalHandler()
	go func() {
		c := mgr.GetCache()
		if c.WaitForCacheSync(ctx) {
			// Informers start lazily; ask for the two this controller uses, then say ready.
			for _, obj := range []client.Object{newDatabase(), &corev1.ConfigMap{}} {
				if _, err := c.GetInformer(ctx, obj); err != nil {
					fail(err)
				}
			}
			c.WaitForCacheSync(ctx)
			fmt.Println("ready")
		}
	}()
	if err := mgr.Start(ctx); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "database-config-cr:", err)
	os.Exit(1)
}
