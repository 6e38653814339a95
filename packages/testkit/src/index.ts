export { type ServiceVariable, serviceUrl } from "./services.js";
