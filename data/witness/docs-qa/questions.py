# (repo, path, heading, [(kind, question, right_answer, wrong_answer), ...])
SECTIONS = [
 # ---------------------------------------------------------------- fd
 ("fd", "README.md", "Installation", [
  ("number", "Starting with which Fedora release can fd be installed from the official Fedora package sources?", "28", "30"),
  ("name", "Which package manager does the README offer as the alternative to Homebrew for installing fd?", "MacPorts", "Nix"),
  ("name", "Which package name does the README say you can install to get fd on Linux and macOS?", "fd-find", "fd"),
 ]),
 ("fd", "README.md", "Troubleshooting", [
  ("phrase", "Why might you have to put quotes around fd's placeholders such as {} or {/.}?", "to stop the shell interpreting them", "so fd treats them as regex"),
  ("yesno", "Is quoting fd's placeholders necessary in every shell?", "no", "yes"),
 ]),
 ("fd", "README.md", "How to use", [
  ("name", "Which flag prints fd's concise help message, as opposed to the more detailed one?", "-h", "--help"),
  ("name", "Which fd option do you use to find files matching exactly the given search pattern?", "-g (--glob)", "-F (--fixed-strings)"),
 ]),

 # ---------------------------------------------------------------- requests
 ("requests", "docs/user/quickstart.rst", "Make a Request", [
  ("phrase", "What page does the quickstart fetch in its first GET example?", "GitHub's public timeline", "the Python.org homepage"),
  ("name", "What type of object does the quickstart say you get back in r after making a request?", "a Response object", "a Request object"),
  ("number", "Besides GET and POST, how many other HTTP request types does the section name as being just as simple?", "4", "3"),
 ]),
 ("requests", "docs/community/faq.rst", "Frequently Asked Questions", [
  ("name", "Who does the Requests FAQ credit with an excellent summary of why Requests doesn't use httplib2?", "Chris Adams", "Kenneth Reitz"),
  ("name", "Besides the officially supported CPython versions, which Python implementation's recent releases does Requests support?", "PyPy", "Jython"),
  ("yesno", "Does Requests let you override the User-Agent string it sends?", "yes", "no"),
 ]),
 ("requests", "docs/community/recommended.rst", "Recommended Packages and Extensions", [
  ("name", "Which project was the Certifi CA bundle extracted from?", "Requests", "urllib3"),
  ("phrase", "What is Certifi a curated collection of?", "Root Certificates", "TLS cipher suites"),
  ("name", "Betamax is described as an imitation of which tool, designed only for Python-Requests?", "VCR", "HTTPretty"),
 ]),
 ("requests", "docs/dev/contributing.rst", "Steps for Submitting Code", [
  ("number", "How many steps does the Requests checklist for submitting code have?", "6", "5"),
  ("name", "Which branch of the main repository should your GitHub pull request target?", "main", "master"),
  ("yesno", "Should the tests you write for your bug or feature fail before you make your change?", "yes", "no"),
  ("phrase", "What should you do if the existing tests fail on your system and you can't work out why?", "raise it as a bug report", "skip the failing tests"),
 ]),
 ("requests", "docs/dev/contributing.rst", "Code of Conduct", [
  ("name", "Which code of conduct are Requests contributors asked to follow?", "Python Software Foundation Code of Conduct", "Contributor Covenant"),
 ]),
 ("requests", "docs/dev/contributing.rst", "Get Early Feedback", [
  ("yesno", "Does submitting an early, unfinished version of a contribution for feedback hurt its chances of being accepted?", "no", "yes"),
  ("phrase", "When does the guide say you should seek feedback on a contribution?", "as early as possible", "once it is polished and complete"),
 ]),
 ("requests", "docs/dev/contributing.rst", "Contribution Suitability", [
  ("name", "Who has the last word on whether a contribution is suitable for Requests?", "the project maintainers", "the BDFL"),
  ("yesno", "Can a contribution be rejected simply because it doesn't suit the project's current goals or needs?", "yes", "no"),
 ]),
 ("requests", "docs/dev/contributing.rst", "Contributor's Guide", [
  ("name", "Besides Nate Prewitt and Seth Michael Larson, who is named as a primary maintainer of Requests?", "Ian Cordasco", "Cory Benfield"),
  ("number", "How many primary maintainers does the contributor's guide name?", "3", "2"),
 ]),
 ("requests", "docs/dev/contributing.rst", "New Contributors", [
  ("phrase", "What does the guide suggest a newcomer do if unsure how best to contribute?", "mail a maintainer for help", "open a discussion issue"),
  ("yesno", "Before filing a bug report, should you search closed GitHub issues as well as open ones?", "yes", "no"),
 ]),

 # ---------------------------------------------------------------- flask
 ("flask", "docs/appcontext.rst", "Visibility of the Context", [
  ("phrase", "What kind of context does Flask push when it handles a CLI command?", "an app context", "a request context"),
  ("name", "Which method gives you the real object behind a proxy such as current_app?", "LocalProxy._get_current_object", "LocalProxy._get_object"),
  ("yesno", "Can you hand a proxy like request to another worker thread and still reach the active context through it?", "no", "yes"),
 ]),
 ("flask", "docs/async-await.rst", "Background tasks", [
  ("yesno", "Can you spawn a background task from an async Flask view with asyncio.create_task?", "no", "yes"),
  ("phrase", "What happens to tasks spawned in an async view that haven't finished when the view function completes?", "they are cancelled", "they keep running in the background"),
  ("name", "Which asgiref adapter lets you spawn asyncio tasks when serving Flask with an ASGI server?", "WsgiToAsgi", "AsgiToWsgi"),
 ]),
 ("flask", "docs/async-await.rst", "Extensions", [
  ("name", "Which Flask method can extension authors use to support async view functions?", "ensure_sync", "async_to_sync"),
  ("yesno", "Will view decorators from extensions that predate Flask's async support probably work with async views?", "no", "yes"),
  ("phrase", "Where should you look to see whether an extension has implemented async support?", "the extension's changelog", "Flask's extension registry"),
 ]),
 ("flask", "docs/blueprints.rst", "Static Files", [
  ("name", "Which Blueprint argument changes the URL path at which the blueprint's static files are exposed?", "static_url_path", "static_folder"),
  ("name", "If a blueprint is registered with the prefix /admin, at what URL is its static folder served?", "/admin/static", "/static/admin"),
  ("yesno", "Can a blueprint's static folder be reached if the blueprint has no url_prefix?", "no", "yes"),
 ]),
 ("flask", "docs/blueprints.rst", "Templates", [
  ("name", "Which config variable makes Flask print out the steps it goes through to locate templates?", "EXPLAIN_TEMPLATE_LOADING", "TEMPLATES_AUTO_RELOAD"),
  ("yesno", "Do templates in a blueprint's template folder take priority over same-named templates in the application's template folder?", "no", "yes"),
  ("phrase", "When several blueprints provide the same relative template path, which one takes precedence?", "the first blueprint registered", "the last blueprint registered"),
 ]),
 ("flask", "docs/blueprints.rst", "Blueprint Error Handlers", [
  ("number", "Besides 404, handlers for which HTTP error code share the blueprint error-handler caveat?", "405", "500"),
  ("yesno", "Is a blueprint's 404 handler invoked when a user requests an invalid URL?", "no", "yes"),
  ("phrase", "Where should you define different 404/405 handling strategies based on URL prefixes?", "at the application level", "in each blueprint"),
 ]),
 ("flask", "docs/cli.rst", "Application Discovery", [
  ("number", "How many parts can a value passed to --app have?", "3", "2"),
  ("name", "Besides create_app, what factory function name does the flask command detect automatically?", "make_app", "app_factory"),
  ("phrase", "How are the contents of the parentheses after a factory name in --app interpreted?", "as Python literals", "as plain strings"),
 ]),
 ("flask", "docs/cli.rst", "Run the Development Server", [
  ("number", "Which port, if already used by another program, makes flask run fail with an OSError?", "5000", "8000"),
  ("name", "Which option tells the reloader to watch additional files?", "--extra-files", "--watch"),
  ("phrase", "What kind of patterns does --exclude-patterns accept?", "fnmatch patterns", "regular expressions"),
 ]),
 ("flask", "docs/cli.rst", "Custom Commands", [
  ("name", "Which library is the flask command implemented with?", "Click", "argparse"),
  ("phrase", "By default, how are CLI commands registered on a blueprint grouped?", "nested in a blueprint-named group", "directly at the application level"),
  ("name", "What cli_group value removes the nesting and merges blueprint commands into the application level?", "None", "False"),
  ("yesno", "Do commands added with app.cli normally need the with_appcontext decorator to access the app?", "no", "yes"),
 ]),
 ("flask", "docs/config.rst", "Configuration Best Practices", [
  ("number", "How many configuration best practices does the section list?", "3", "5"),
  ("yesno", "Is it fine to write code that needs the configuration at import time?", "no", "yes"),
  ("name", "Which extension method should be able to access the configuration, which is why it must be loaded early?", "init_app", "register_extension"),
 ]),
 ("flask", "docs/debugging.rst", "In Production", [
  ("yesno", "Should you rely on the built-in debugger's PIN to keep a production server secure?", "no", "yes"),
  ("name", "Which error logging tool does the page give as an example for production?", "Sentry", "Rollbar"),
  ("name", "Which request attribute could you compare against your IP before starting an external debugger on a server?", "request.remote_addr", "request.host"),
 ]),
 ("flask", "docs/deploying/uwsgi.rst", "Binding Externally", [
  ("yesno", "Should uWSGI be run as root with the configuration shown in Flask's docs?", "no", "yes"),
  ("number", "Besides port 80, which privileged port can't uWSGI bind to when not run as root?", "443", "8080"),
  ("name", "Which option binds uWSGI to all external IPs on a non-privileged port?", "--http 0.0.0.0:8000", "--socket 0.0.0.0:8000"),
 ]),
 ("flask", "docs/deploying/gunicorn.rst", "Async with gevent", [
  ("number", "What minimum greenlet version is required when using gevent with Gunicorn?", "1.0", "2.0"),
  ("number", "What minimum PyPy version is required when using gevent with Gunicorn on PyPy?", "7.3.7", "7.3.1"),
  ("yesno", "Is Gunicorn's gevent worker the same as Python's async/await?", "no", "yes"),
 ]),
 ("flask", "docs/deploying/mod_wsgi.rst", "Running", [
  ("name", "What must the Flask application be called in the script passed to mod_wsgi-express?", "application", "app"),
  ("number", "By what multiple of the CPU count does the page suggest starting the --processes value?", "2", "4"),
  ("yesno", "Does mod_wsgi-express show a log line for each request in the terminal?", "no", "yes"),
 ]),
 ("flask", "docs/deploying/nginx.rst", "Configuration", [
  ("name", "Where is the nginx configuration file located on Linux?", "/etc/nginx/nginx.conf", "/etc/nginx/sites-enabled/default"),
  ("name", "Which nginx directive points the server section at the WSGI server's address?", "proxy_pass", "uwsgi_pass"),
  ("number", "On which local port is the WSGI server assumed to be listening?", "8000", "5000"),
 ]),
 ("flask", "docs/design.rst", "The Routing System", [
  ("name", "Whose routing system does Flask use?", "Werkzeug's", "Starlette's"),
  ("phrase", "How are routes ordered, so they can be declared in any order?", "automatically by complexity", "in the order they are declared"),
  ("phrase", "What does Werkzeug do when a route is ambiguous?", "redirects to a canonical URL", "returns a 404 error"),
 ]),
 ("flask", "docs/design.rst", "One Template Engine", [
  ("name", "Which template engine is described as based on XML stream evaluation?", "Genshi", "Mako"),
  ("yesno", "If you use a different template engine, does Flask stop configuring Jinja?", "no", "yes"),
  ("phrase", "Why doesn't Flask provide a template abstraction layer?", "too large for a microframework", "Jinja's license forbids it"),
 ]),
 ("flask", "docs/design.rst", "Async/await and ASGI support", [
  ("phrase", "How does Flask execute async view coroutines?", "on a separate thread", "on the main thread's event loop"),
  ("phrase", "Why does Flask run coroutines this way rather than async-first?", "backwards compatibility with existing extensions", "better performance than ASGI frameworks"),
  ("yesno", "Does this approach carry a performance cost compared with ASGI frameworks?", "yes", "no"),
  ("name", "In which project is work under way to support ASGI, possibly enabling it in Flask later?", "Werkzeug", "Quart"),
 ]),
 ("flask", "docs/errorhandling.rst", "Custom Error Pages", [
  ("number", "Which status code does the profile example raise when no username is passed?", "400", "404"),
  ("number", "In the profile example, which status code is raised when a username is given but the user can't be found?", "404", "400"),
  ("name", "What custom template does the section create for server errors?", "500.html", "error.html"),
 ]),
 ("flask", "docs/extensiondev.rst", "Naming", [
  ("yesno", "If a Flask extension wraps another library, should its name include that library's name?", "yes", "no"),
  ("phrase", "How are words separated in an extension's import name?", "with underscores", "with dashes"),
  ("name", "What is the install name Flask-ComboName imported as?", "flask_comboname", "flask_combo_name"),
 ]),
 ("flask", "docs/extensiondev.rst", "Configuration Techniques", [
  ("phrase", "What should an extension's app.config keys start with?", "the extension's name", "FLASK_"),
  ("name", "Which class attribute is given as an example of global configuration that changes default behavior without subclassing?", "Ext.connection_class", "Ext.config_class"),
  ("yesno", "Is it okay to change configuration after the server has begun handling requests?", "no", "yes"),
 ]),
 ("flask", "docs/extensiondev.rst", "Recommended Extension Guidelines", [
  ("name", "Which GitHub organization allows community maintenance of extensions with oversight from the Pallets maintainers?", "Pallets-Eco", "Pallets-Community"),
  ("number", "Python versions within how many months of end of life are no longer supported under Flask and Pallets policy?", "6", "12"),
  ("yesno", "Should an extension's dependencies use upper version bounds?", "no", "yes"),
  ("number", "Which SQLAlchemy version appears in the example lower-bound dependency?", "1.4", "2.0"),
 ]),
 ("flask", "docs/installation.rst", "Virtual environments", [
  ("name", "Which module bundled with Python is used to create virtual environments?", "venv", "virtualenv"),
  ("name", "What is the folder created inside the project folder for the environment called?", ".venv", "env"),
  ("yesno", "Does the page recommend using a virtual environment in production as well as in development?", "yes", "no"),
 ]),
 ("flask", "docs/patterns/fileuploads.rst", "A Gentle Introduction", [
  ("name", "Which Werkzeug function should you always use on a filename before storing it directly on the filesystem?", "secure_filename", "safe_join"),
  ("phrase", "Why does the example limit the allowed upload extensions, for instance forbidding HTML files?", "to prevent XSS problems", "to save disk space"),
  ("name", "Which file type should also be disallowed if the server executes them?", ".php", ".py"),
 ]),
 ("flask", "docs/patterns/viewdecorators.rst", "Caching Decorator", [
  ("number", "By default, for how many minutes does the caching decorator store a view's return value?", "5", "10"),
  ("number", "How many steps does the decorated view go through when using the caching decorator?", "3", "2"),
  ("phrase", "From what is the cache key generated?", "a prefix plus the request path", "the view function's arguments"),
  ("yesno", "Does the caching decorator assume an instantiated cache object is already available?", "yes", "no"),
 ]),
 ("flask", "docs/quickstart.rst", "A Minimal Application", [
  ("name", "What should you avoid naming your application file because it would conflict with Flask itself?", "flask.py", "app.py"),
  ("number", "On which port does the quickstart tell you to look for your hello world greeting?", "5000", "8000"),
  ("name", "What --host value makes the development server publicly available?", "0.0.0.0", "127.0.0.1"),
  ("phrase", "Why is the development server reachable only from your own computer by default?", "debug mode allows arbitrary code execution", "to avoid port conflicts"),
  ("phrase", "What is the default content type of the string returned by a view?", "HTML", "plain text"),
 ]),
 ("flask", "docs/quickstart.rst", "Unique URLs / Redirection Behavior", [
  ("phrase", "What happens if you request /projects when the rule is defined as /projects/?", "Flask redirects to /projects/", "a 404 error"),
  ("number", "Which status code do you get when requesting /about/ for a rule defined as /about?", "404", "308"),
  ("phrase", "Why does keeping these URLs unique help?", "avoids duplicate search-engine indexing", "it speeds up URL matching"),
 ]),
 ("flask", "docs/quickstart.rst", "URL Building", [
  ("phrase", "What happens to unknown variable parts passed to url_for?", "they are appended as query parameters", "a BuildError is raised"),
  ("yesno", "Are the paths generated by url_for always absolute?", "yes", "no"),
  ("name", "Which method does the example use to try out url_for from a Python shell?", "test_request_context", "app_context"),
  ("number", "How many reasons does the quickstart give for building URLs instead of hard-coding them?", "5", "3"),
 ]),
 ("flask", "docs/quickstart.rst", "Rendering Templates", [
  ("name", "Which Jinja filter marks a trusted variable as safe HTML in a template?", "|safe", "|escape"),
  ("number", "How many template file extensions does the quickstart say trigger autoescaping?", "4", "5"),
  ("name", "Which documentation does the quickstart recommend as a reference for HTML and CSS?", "MDN Web Docs", "W3Schools"),
 ]),
 ("flask", "docs/quickstart.rst", "Accessing Request Data", [
  ("number", "What HTTP error is returned if a missing form key's KeyError isn't caught?", "400", "500"),
  ("name", "Which request attribute holds parameters submitted in the URL query string?", "request.args", "request.params"),
  ("name", "Which enctype must an HTML form set so the browser transmits uploaded files?", "multipart/form-data", "application/x-www-form-urlencoded"),
  ("yesno", "Can you trust the client-supplied FileStorage.filename value?", "no", "yes"),
 ]),
 ("flask", "docs/templating.rst", "Context Processors", [
  ("phrase", "What does a context processor function return?", "a dictionary", "a list"),
  ("phrase", "When do context processors run?", "before the template is rendered", "after the template is rendered"),
  ("yesno", "Can a context processor make functions, not only values, available to templates?", "yes", "no"),
  ("name", "Which function does the example context processor expose to all templates?", "format_price", "format_currency"),
 ]),
 ("flask", "docs/testing.rst", "Sending Requests with the Test Client", [
  ("name", "Which Werkzeug class documents the full set of arguments for building test requests?", "werkzeug.test.EnvironBuilder", "werkzeug.test.Client"),
  ("number", "Which Werkzeug version provides response.text?", "2.1", "2.0"),
  ("yesno", "Do file objects passed in data need the usual with open() pattern to be closed?", "no", "yes"),
 ]),
 ("flask", "docs/tutorial/deploy.rst", "Build and Install", [
  ("phrase", "What kind of file do you build to deploy the tutorial application elsewhere?", "a wheel (.whl) file", "a source tarball"),
  ("number", "What version number appears in the built flaskr wheel's file name?", "1.0.0", "0.1.0"),
  ("name", "Where is the instance folder when the project is installed rather than in editable mode?", ".venv/var/flaskr-instance", "instance/"),
 ]),
 ("flask", "docs/tutorial/next.rst", "Keep Developing!", [
  ("number", "How many posts per page does the paged-display idea suggest showing?", "5", "10"),
  ("name", "Besides Jinja, Click and Werkzeug, which library does Flask use behind the scenes?", "ItsDangerous", "MarkupSafe"),
  ("name", "Which markup format is suggested for formatting posts?", "Markdown", "reStructuredText"),
 ]),
 ("flask", "docs/tutorial/templates.rst", "The Base Layout", [
  ("number", "How many blocks does the tutorial's base template define for other templates to override?", "3", "4"),
  ("name", "Which function's messages does the base template loop over to display errors?", "get_flashed_messages", "flash"),
  ("phrase", "Where are a blueprint's templates placed?", "a directory named after the blueprint", "directly in the templates directory"),
 ]),
 ("flask", "docs/patterns/templateinheritance.rst", "Base Template", [
  ("name", "What is the base template in the template inheritance example called?", "layout.html", "base.html"),
  ("number", "How many blocks does the example base template define for child templates to fill?", "4", "3"),
 ]),
 ("flask", "docs/web-security.rst", "Resource Use", [
  ("number", "What is MAX_FORM_MEMORY_SIZE set to by default?", "500kB", "1MB"),
  ("number", "What is MAX_FORM_PARTS set to by default?", "1000", "100"),
  ("yesno", "Is MAX_CONTENT_LENGTH set by default?", "no", "yes"),
  ("number", "With the default limits, at most how much memory can a form occupy?", "500MB", "1GB"),
 ]),
 ("flask", "docs/web-security.rst", "Cross-Site Request Forgery (CSRF)", [
  ("phrase", "What does the section describe as the theoretical way to prevent CSRF?", "a one-time token", "checking the Referer header"),
  ("phrase", "Why doesn't Flask protect against CSRF for you?", "Flask has no form validation framework", "browsers already block it"),
 ]),
 ("flask", "docs/lifecycle.rst", "Serving the Application", [
  ("number", "What number identifies the WSGI spec that every WSGI server follows?", "3333", "333"),
  ("name", "Through which library does Flask provide its development WSGI server?", "Werkzeug", "Gunicorn"),
 ]),
]
