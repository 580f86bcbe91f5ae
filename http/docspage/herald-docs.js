// Starts Swagger UI on the documentation page. It is a file of its own, not
// a script in the page, so that the page's Content-Security-Policy allows
// scripts from this origin alone: the web client, on the same origin, keeps
// its token in the browser's storage.
"use strict";

window.ui = SwaggerUIBundle({
	url: "/api/docs.json",
	dom_id: "#swagger-ui",
	deepLinking: true,
	presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
	plugins: [
		SwaggerUIBundle.plugins.DownloadUrl,
		// No top bar: its field for loading another document's URL has no
		// use on a page that documents this server alone.
		() => ({ components: { Topbar: () => null } }),
	],
	layout: "StandaloneLayout",
	showExtensions: true,
	showCommonExtensions: true,
	// A pasted token survives a reload, so trying several operations does
	// not mean pasting it again each time.
	persistAuthorization: true,
	// Swagger UI would send the document to validator.swagger.io for a
	// badge; the page must not talk to any outside host.
	validatorUrl: null,
	// Show the schemas section: it is the reference for the bodies.
	defaultModelsExpandDepth: 1,
	displayRequestDuration: true,
});
