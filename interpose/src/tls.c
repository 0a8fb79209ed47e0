/*
 * The calling thread's serving() depth (precompile_serving_enter/exit in
 * abi.rs, read by every exec's gate). A C thread local: the library is built
 * without Rust's std, which is what Rust thread locals need. Zero-initialised,
 * no destructor and the same TLS model as the Rust thread local it replaces
 * (const init, no Drop): nothing is registered per thread.
 *
 * Hidden (-fvisibility=hidden): only the Rust side calls these.
 */
static __thread unsigned int serving_depth;

unsigned int precompile_c_serving_depth(void)
{
	return serving_depth;
}

void precompile_c_set_serving_depth(unsigned int depth)
{
	serving_depth = depth;
}
