package wasmop

import "fmt"

// The contract's worlds (wit/plugin.wit), each what one set of registrations needs.
const (
	worldPlugin              = "plugin"                // Register
	worldPluginWithAdmission = "plugin-with-admission" // Register and RegisterAdmission
	worldAdmissionPlugin     = "admission-plugin"      // RegisterAdmissionOnly
)

// CheckWorld panics unless what the plugin registered is what world needs, for the build's
// glue: world is the one guest-sdk/go/build picked from the registration calls it read in
// the plugin's source, and the glue's init function calls this once the plugin's init
// functions have run. The build pre-initialises the component, which runs them: a plugin that
// registers nothing, an admission half beside no reconciler, or registrations the build read
// otherwise than they ran fails its build with the reason, not its load.
func CheckWorld(world string) {
	if err := checkWorld(world); err != nil {
		panic(err.Error())
	}
}

func checkWorld(world string) error {
	var need string
	switch {
	case registeredAdmission != nil && registeredAdmission.standalone:
		need = worldAdmissionPlugin
	case registeredAdmission != nil && registered == nil:
		return fmt.Errorf("the plugin registers an admission half beside a reconciler (wasmop.RegisterAdmission) " +
			"but no reconciler: call wasmop.Register too, or register the admission half alone with " +
			"wasmop.RegisterAdmissionOnly(name, version, admission)")
	case registeredAdmission != nil:
		need = worldPluginWithAdmission
	case registered != nil:
		need = worldPlugin
	default:
		return fmt.Errorf("the plugin registers nothing: call wasmop.Register (and wasmop.RegisterAdmission for " +
			"webhooks beside it) or wasmop.RegisterAdmissionOnly in its package's init function")
	}
	if need != world {
		return fmt.Errorf("the plugin's registrations need the world %s, but guest-sdk/go/build built it against %s: "+
			"the build picks the world from the calls of wasmop.Register, wasmop.RegisterAdmission and "+
			"wasmop.RegisterAdmissionOnly in the non-test .go files at the root of the plugin's module; make them there",
			need, world)
	}
	return nil
}
