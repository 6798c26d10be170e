// The main of the floors' link checks (cmake/floors.cmake): never run. The executable
// exists so that the linker resolves every reference of one floor's objects against
// that floor and the floors below it only.
int main() { return 0; }
