package adminapi

// RoutePaths are the paths the API routes, for the OpenAPI test.
func RoutePaths() []string {
	var paths []string
	for _, r := range routes() {
		paths = append(paths, r.path)
	}
	return paths
}
